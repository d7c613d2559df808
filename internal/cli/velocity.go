package cli

import (
	"context"
	"flag"
	"fmt"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/operator"
	"github.com/rs/zerolog"
)

// velocityFlags are the recipient velocity limit of load, run and the
// console's uploads (docs/controls.md, "Recipient velocity").
type velocityFlags struct {
	count  int64
	amount string
	action string
}

func (v *velocityFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&v.count, "velocity-count", 0, "recipient velocity: at most this many payouts a day (UTC, Redis's clock) to one card or phone, across batches (0: no limit)")
	fs.StringVar(&v.amount, "velocity-amount", "", "recipient velocity: at most this sum a day (UTC, Redis's clock) to one card or phone, across batches (empty or 0: no limit)")
	fs.StringVar(&v.action, "velocity-action", loader.VelocityHold, "a row over a velocity limit: hold (registered as held; a person releases or cancels it) or refuse (the file is refused with the row's line, as any bad row; --partial leaves the row out)")
}

// options are the limits the flags give (off when neither is set).
func (v *velocityFlags) options() (loader.Velocity, error) {
	var o loader.Velocity
	switch v.action {
	case loader.VelocityHold, loader.VelocityRefuse:
		o.Action = v.action
	default:
		return o, usageErr("--velocity-action %q: want hold or refuse", v.action)
	}
	if v.count < 0 {
		return o, usageErr("--velocity-count %d: want 0 (no limit) or more", v.count)
	}
	o.Limits = ledger.VelocityLimits{Count: v.count}
	if v.amount != "" && v.amount != "0" {
		a, err := parseLimit("velocity-amount", v.amount)
		if err != nil {
			return o, err
		}
		o.Limits.Amount = a
	}
	return o, nil
}

// runRelease lets payouts held over their recipient's velocity limit go
// (operator.Release: counted toward the recipient today, back to queued,
// their create enqueued).
func runRelease(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "release", "[flags] BATCH-or-FILE EXTERNALID...")
	var o operatorAction
	o.register(fs, "releases")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		return usageErr("release takes a BATCH or FILE and the externalIds of its held payouts to release")
	}
	rdb, err := o.open(ctx, e, fs)
	if err != nil {
		return err
	}
	defer rdb.Close()
	acts, err := o.roles.actions(operator.New(rdb, nil, zerolog.Nop()), o.who)
	if err != nil {
		return err
	}
	_, _, err = eachPayout(fs.Args()[1:], func(ext string) (string, error) {
		r, err := acts.Release(ctx, o.batch, ext, o.who, o.note)
		return r.Words(), err
	}, func(words string) { fmt.Fprintln(e.stdout, words) })
	return err
}
