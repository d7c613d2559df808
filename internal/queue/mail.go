package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
)

// The queue contract of the mail to people (package mail): a queue of its
// own, served by the workers that send mail on an Asynq server of their
// own (internal/worker), so that a mail server that is down or slow never
// takes a payout's slot.
const (
	MailQueue = "mail"
	// MailMaxRetry bounds the retries of one mail task; with the mail
	// package's backoff (mail.RetryDelay) they span about a day, then the
	// task is archived (visible in the web UI, where it can be run again).
	MailMaxRetry = 25
	// MailTimeout bounds one run of a mail task: a few SMTP transactions.
	MailTimeout = 2 * time.Minute
)

// MailTask is one task of the mail queue: the mail package's type, ID and
// payload, run at At (zero: now) and kept, once done, for Retention (its
// ID refuses the same task meanwhile).
type MailTask struct {
	Type      string
	ID        string
	Payload   []byte
	At        time.Time
	Retention time.Duration
}

// AddMail enqueues t unless a task holds its ID already (then it reports
// false).
func (q *Queue) AddMail(ctx context.Context, t MailTask) (bool, error) {
	opts := []asynq.Option{asynq.Queue(MailQueue), asynq.TaskID(t.ID), asynq.MaxRetry(MailMaxRetry),
		asynq.Timeout(MailTimeout)}
	if t.Retention > 0 {
		opts = append(opts, asynq.Retention(t.Retention))
	}
	if !t.At.IsZero() {
		opts = append(opts, asynq.ProcessAt(t.At))
	}
	if _, err := q.client.EnqueueContext(ctx, asynq.NewTask(t.Type, t.Payload, opts...)); err != nil {
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, nil
		}
		return false, fmt.Errorf("queue: enqueue %s: %w", t.Type, err)
	}
	return true, nil
}
