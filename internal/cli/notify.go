package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/mail"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/report"
	"github.com/acme/payout/internal/worker"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// notifyFlags say where notifications go (package notify).
type notifyFlags struct {
	urls urlList
	mail bool // --mail: events people are mailed about go to the mail queue too
}

func (n *notifyFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&n.mail, "mail", false, "queue the mail to people about the events this command sees (batch awaiting approval, batch final, payout needs review); "+
		"a worker with --smtp-url sends them (docs/operations.md#mail-to-people)")
	fs.Var(&n.urls, "notify-url", "send Standard Webhooks deliveries of the events (every payout state change: payout.created, payout.paid...; "+
		"batch awaiting approval, batch final, payout needs review, queue paused/resumed) to this URL; TYPES=URL subscribes to some types only "+
		"(payout.paid|payout.returned|batch_*=https://...); repeatable, comma-separated in the environment; needs "+notify.SecretEnv+
		" (whsec_ secret; two, space-separated, while rotating)")
}

// check refuses URLs without a secret: the workers sign every delivery
// and refuse to send unsigned ones. It runs before anything is done.
func (n *notifyFlags) check(e *env) error {
	if len(n.urls) > 0 && e.getenv(notify.SecretEnv) == "" {
		return usageErr("--notify-url needs %s (the key that signs notifications)", notify.SecretEnv)
	}
	if v := e.getenv(notify.SecretEnv); v != "" {
		if _, err := notify.NewSigner(v); err != nil {
			return usageErr("%v", err)
		}
	}
	return nil
}

// emitter returns the Emitter of the URLs and, with --mail, of the mail
// queue (nil without either).
func (n *notifyFlags) emitter(rdb redis.UniversalClient) *notify.Emitter {
	var sinks []notify.Sink
	if n.mail {
		sinks = append(sinks, mail.NewSink(queue.New(rdb)))
	}
	return notify.NewEmitter(rdb, n.urls, sinks...)
}

// deliverer is the worker's delivery handler, when PAYOUT_NOTIFY_SECRET
// is set: a worker delivers what any process enqueued, with or without
// --notify-url of its own.
func deliverer(e *env, rdb redis.UniversalClient, log zerolog.Logger) *notify.Deliverer {
	d, err := notify.NewDeliverer(e.getenv(notify.SecretEnv), log.With().Str("component", "notify").Logger())
	if err != nil {
		return nil
	}
	return d.Logging(rdb)
}

// configure sets the worker's notifications: what it emits, and the
// deliveries it makes when PAYOUT_NOTIFY_SECRET is set.
func (n *notifyFlags) configure(e *env, rdb redis.UniversalClient, c *worker.Config, log zerolog.Logger) error {
	if err := n.check(e); err != nil {
		return err
	}
	c.Notify = worker.NotifyConfig{Emitter: n.emitter(rdb), Deliverer: deliverer(e, rdb, log)}
	return nil
}

// finish ends payout run: it emits batch_final, then, when the run has
// URLs, delivers what is still queued for up to drainFor (an embedded
// Redis ends with the command; with a real one a worker delivers the
// rest).
func (n *notifyFlags) finish(ctx context.Context, e *env, rdb redis.UniversalClient, batch string, sum report.Summary, log zerolog.Logger) {
	em := n.emitter(rdb)
	if em == nil {
		return
	}
	if err := em.Emit(ctx, notify.Final(batch, sum)); err != nil {
		fmt.Fprintf(e.stderr, "notification of the final batch not queued: %v\n", err)
	}
	d := deliverer(e, rdb, log)
	if d == nil {
		return
	}
	if _, err := worker.PumpEvents(ctx, ledger.New(rdb), em); err != nil {
		fmt.Fprintf(e.stderr, "payout events not queued: %v\n", err)
	}
	if left := notify.Drain(ctx, rdb, d, drainFor); left > 0 {
		fmt.Fprintf(e.stderr, "%d notifications not delivered yet (receiver down?); a worker with %s delivers them from this Redis\n", left, notify.SecretEnv)
	}
}

// drainFor bounds how long payout run waits for its notifications.
const drainFor = 15 * time.Second

// urlList is a repeatable flag of URLs; one value may hold several,
// comma-separated (as PAYOUT_NOTIFY_URL does).
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, ",") }

func (u *urlList) Set(v string) error {
	for _, s := range splitList(v) {
		if _, err := notify.ParseEndpoint(s); err != nil {
			return err
		}
		*u = append(*u, s)
	}
	return nil
}
