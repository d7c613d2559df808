// Package uitest wires the web UI to the real ledger, loader and operator
// actions, as payout ui does, for the UI's handler tests and the browser
// test of the e2e module.
package uitest

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/operator"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Options say how the UI under test is configured.
type Options struct {
	User, Password string
	// Users are named logins (a users file) instead of User and Password.
	Users    *ui.Users
	ReadOnly bool
	// Spool enables the upload (its directory).
	Spool string
	// ApprovalRequired: confirmed uploads wait for approval.
	ApprovalRequired bool
	FourEyes         bool
	// ApprovalRules and ApprovalExpiry are the uploads' approval rules
	// and how long a batch may await approval (payout ui
	// --approval-rules, --approval-expiry; zero: never expires).
	ApprovalRules  approval.Set
	ApprovalExpiry time.Duration
	DailyLimit     money.Amount
	// NotifyURLs receive notifications (queued in Redis; nothing is
	// delivered by the UI itself).
	NotifyURLs []string
	// PSP is asked before a payout is marked created or rejected (nil:
	// those are refused); OutcomeWindow is a marked-created payout's.
	PSP           operator.StatusChecker
	OutcomeWindow time.Duration
	// Roles map the signed-in people to roles (payout ui --roles-file;
	// nil: everyone holds every role but admin).
	Roles *access.Map
}

// Config returns a UI configuration on rdb with the operator's actions,
// the batches of the ledger and, with o.Spool, the upload (card numbers
// sealed with an ephemeral key).
func Config(t testing.TB, rdb redis.UniversalClient, o Options) ui.Config {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	var em *notify.Emitter
	if len(o.NotifyURLs) > 0 {
		em = notify.NewEmitter(rdb, o.NotifyURLs)
	}
	led := ledger.New(rdb)
	console := operator.NewConsole(rdb)
	console.Queue = rdb
	cfg := ui.Config{Redis: rdb, User: o.User, Password: o.Password, Users: o.Users, ReadOnly: o.ReadOnly, FourEyes: o.FourEyes, Logger: log, Roles: o.Roles,
		Registry: prometheus.NewRegistry(), Batches: operator.Batches{Ledger: led, Queue: rdb}, Console: console,
		Controls: operator.UIControls{Actions: operator.New(rdb, em, log), FourEyes: o.FourEyes, DailyLimit: o.DailyLimit,
			PSP: o.PSP, OutcomeWindow: o.OutcomeWindow}}
	if o.Spool != "" {
		ld := loader.New(led, queue.New(rdb), vault.Ephemeral(), log)
		ld.Notify = em
		cfg.Uploads = operator.UIUploads{Loader: ld, Spool: o.Spool, Options: loader.SpoolOptions{
			Load: loader.Options{Approval: loader.Approval{Required: o.ApprovalRequired,
				Rules: o.ApprovalRules, Expiry: o.ApprovalExpiry}}, Settle: time.Second}}
	}
	return cfg
}
