package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acme/payout/internal/mail"
	"github.com/acme/payout/internal/queue"
	"github.com/hibiken/asynq"
)

// MailConfig says whether this worker sends the mail to people (package
// mail) that any process enqueued on queue.MailQueue.
type MailConfig struct {
	// Mailer, when set, runs the mail tasks on a server of its own.
	Mailer *mail.Mailer
	// Concurrency of the mail server; default 2.
	Concurrency int
}

// serveMail starts the mail server when a Mailer is set, for the same
// reason the notifications have one of their own (notify.go): a mail
// server that hangs holds mail tasks, never a payout's slot. It shuts down
// when ctx is done; the returned func waits for that.
func (w *Worker) serveMail(ctx context.Context) (wait func()) {
	m := w.cfg.Mail.Mailer
	if m == nil {
		return func() {}
	}
	n := w.cfg.Mail.Concurrency
	if n <= 0 {
		n = 2
	}
	srv := asynq.NewServerFromRedisClient(w.rdb, asynq.Config{
		Concurrency:              n,
		Queues:                   map[string]int{queue.MailQueue: 1},
		RetryDelayFunc:           func(k int, _ error, _ *asynq.Task) time.Duration { return mail.RetryDelay(k) },
		ShutdownTimeout:          min(w.cfg.ShutdownTimeout, 5*time.Second),
		DelayedTaskCheckInterval: w.cfg.PollInterval,
		TaskCheckInterval:        w.cfg.PollInterval,
		Logger:                   newAsynqLogger(w.log.With().Str("component", "asynq-mail").Logger()),
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := m.Handle(ctx, t.Type(), t.Payload())
		if errors.Is(err, mail.ErrPermanent) {
			return fmt.Errorf("%w: %w", err, asynq.SkipRetry)
		}
		return err
	})
	for _, typ := range []string{mail.TypeEvent, mail.TypeDigest, mail.TypeEndpoint} {
		mux.Handle(typ, h)
	}
	if err := srv.Start(mux); err != nil {
		// Mails wait in Redis for a worker that sends them; payouts go on.
		w.log.Error().Err(err).Msg("mail server not started")
		return func() {}
	}
	w.log.Info().Int("concurrency", n).Str("queue", queue.MailQueue).Msg("sending mail")
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		srv.Shutdown()
	})
	return wg.Wait
}
