package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/view"
)

// runHistory prints the audit trail of a batch (every state change, who
// caused it, with what answer), of one payout, or, without a batch, the
// operator actions on the queue.
func runHistory(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "history", "[flags] [BATCH-or-FILE [EXTERNALID]]")
	var (
		rf     redisFlags
		rl     rolesFlags
		asJSON bool
	)
	rf.register(fs)
	rl.register(fs)
	fs.BoolVar(&asJSON, "json", false, "one JSON object a line")
	if err := parse(e, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 2 {
		return usageErr("history takes at most a BATCH (or FILE) and an EXTERNALID")
	}
	if err := rl.mayRead(ctx, e, "history"); err != nil {
		return err
	}
	rdb, err := rf.open(ctx, e)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l := ledger.New(rdb)
	var batch, ext string
	if fs.NArg() >= 1 {
		if batch, err = resolveBatch(ctx, l, fs.Arg(0)); err != nil {
			return err
		}
	}
	if fs.NArg() == 2 {
		ext = fs.Arg(1)
	}
	enc := json.NewEncoder(e.stdout)
	n := 0
	err = l.Audit().Each(ctx, batch, ext, func(a ledger.AuditEntry) error {
		n++
		if asJSON {
			return enc.Encode(a)
		}
		_, err := fmt.Fprintln(e.stdout, auditLine(a))
		return err
	})
	if err != nil {
		return infraErr(err)
	}
	if n == 0 && !asJSON {
		fmt.Fprintln(e.stdout, "no entries")
	}
	if batch != "" && !asJSON {
		// The status checks that changed nothing leave no entry: their
		// count, kept by the ledger, says how often the PSP was asked.
		line, err := statusChecks(ctx, l, batch, ext)
		if err != nil {
			return infraErr(err)
		}
		fmt.Fprintln(e.stdout, line)
	}
	return nil
}

// statusChecks is the closing line of a batch's or a payout's history:
// how many status checks the workers made and recorded (of an unknown
// create and of a created order's outcome), including those that changed
// nothing and so have no entry above.
func statusChecks(ctx context.Context, l *ledger.Ledger, batch, ext string) (string, error) {
	if ext != "" {
		p, err := l.Get(ctx, batch, ext)
		if errors.Is(err, ledger.ErrNotFound) {
			return "status checks: none (no such payout in the ledger)", nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("status checks: %d of payout %s (asked of the PSP and recorded, including those that changed nothing)", p.Checks, term(ext)), nil
	}
	c, err := view.New(l.Redis()).Counts(ctx, batch)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("status checks: %d for the batch's payouts (asked of the PSP and recorded, including those that changed nothing)", c.Checks), nil
}

// auditLine is one entry as text: time, actor, payout, from -> to, context
// (with role=ROLE, the role the person acted in, when recorded).
func auditLine(a ledger.AuditEntry) string {
	var ctx []string
	fields := make(map[string]string, len(a.Context)+1)
	for k, v := range a.Context {
		fields[k] = v
	}
	if a.Role != "" {
		fields["role"] = a.Role
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ctx = append(ctx, k+"="+term(fields[k]))
	}
	what := a.To
	if a.From != "" {
		what = a.From + " -> " + a.To
	}
	who := term(a.ExternalID)
	if who == "" {
		who = "-"
	}
	return strings.TrimRight(fmt.Sprintf("%s  %-24s  %-16s  %-28s  %s", a.Time.Format("2006-01-02T15:04:05.000Z"), term(a.Actor), who, term(what), strings.Join(ctx, " ")), " ")
}
