package loader

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
)

// The recipient velocity limit at load (docs/controls.md, "Recipient
// velocity"). A row counts toward its destination's day when its file is
// loaded: after the file is judged acceptable and before any row of it is
// registered, so two files loaded at once cannot both pass a limit (the
// ledger counts the rows of one destination in one atomic step). What
// counts:
//
//   - a row within the limits is counted, and its payout records the count
//     (ledger.NewPayout.Velocity);
//   - a row over a limit is not counted: under VelocityRefuse it is an
//     error of its line (column cardNumber or phoneNumber), and the file
//     is refused whole, its counts given back, unless --partial (then the
//     row alone is left out); under VelocityHold it is registered and
//     held (state held) for a person to release or cancel;
//   - a payout a person cancels (or a discarded batch's) is given back; a
//     payout sent, paid, failed or rejected keeps its count (the safe
//     side: a retry file the same day counts again);
//   - a load that dies between counting and registering leaves its counts
//     until the day ends (the safe side); its rerun counts nothing twice.
//
// A dry run does not count. Rows without a known destination (a telecom
// row without a phone number) are not counted.

// The actions on a row over the limit (--velocity-action).
const (
	VelocityHold   = "hold"
	VelocityRefuse = "refuse"
)

// Velocity is the recipient velocity limit a load applies.
type Velocity struct {
	Limits ledger.VelocityLimits
	Action string // VelocityHold or VelocityRefuse
}

// Tagger gives a destination's keyed hash (vault.Keyring.DestinationTag).
type Tagger interface {
	DestinationTag(destination string) string
}

// destinationOf is the canonical form of a row's destination that is
// tagged, and the column that holds it ("" when the row has none known).
func destinationOf(r payfile.Row) (dest, column string) {
	if r.CardNumber != "" {
		return "card:" + r.CardNumber, payfile.ColCardNumber
	}
	for _, p := range r.Extra {
		if strings.EqualFold(p.Key, payfile.ColPhoneNumber) {
			digits := strings.Map(func(c rune) rune {
				if c >= '0' && c <= '9' {
					return c
				}
				return -1
			}, p.Value)
			if digits == "" {
				return "", ""
			}
			return "phone:" + strings.ToLower(r.TelecomOperator) + ":" + digits, payfile.ColPhoneNumber
		}
	}
	return "", ""
}

// heldRow is a row over the limit under VelocityHold.
type heldRow struct {
	ext, reason, tag string
}

// velocityPass is what counting a file's rows found.
type velocityPass struct {
	day    string
	tags   map[int]string  // line -> tag of the rows counted (now or before)
	held   map[int]heldRow // line -> row over the limit (hold)
	over   []payfile.Error // rows over the limit (refuse)
	exts   []string        // rows counted by this pass (not before), to give back
	marks  []string
	scale  int
	action string
}

// countVelocity counts the valid rows of a file toward their
// destinations' limits (see above). It returns nil when no limit is set.
func (ld *Loader) countVelocity(ctx context.Context, f *os.File, res Result, opts Options, bad *lineSet) (*velocityPass, error) {
	v := opts.Velocity
	if !v.Limits.On() {
		return nil, nil
	}
	tagger, ok := ld.sealer.(Tagger)
	if !ok {
		return nil, fmt.Errorf("recipient velocity limit: the loader has no key to tag destinations with")
	}
	day, err := ld.ledger.Velocity().Day(ctx)
	if err != nil {
		return nil, err
	}
	vp := &velocityPass{day: day, tags: map[int]string{}, held: map[int]heldRow{}, scale: res.Scale, action: v.Action}
	vel := ld.ledger.Velocity()
	err = ld.eachValid(ctx, f, res.File, opts, bad, func(rows []payfile.Row) error {
		var vr []ledger.VelocityRow
		var of []payfile.Row
		var cols []string
		for _, r := range rows {
			dest, col := destinationOf(r)
			if dest == "" {
				continue
			}
			vr = append(vr, ledger.VelocityRow{Tag: tagger.DestinationTag(dest), ExternalID: r.ExternalID, Amount: r.Amount})
			of, cols = append(of, r), append(cols, col)
		}
		verdicts, err := vel.Count(ctx, day, res.Batch, vr, v.Limits, false)
		if err != nil {
			return err
		}
		for i, r := range of {
			vp.judge(r, cols[i], vr[i], verdicts[i], res.File, v.Limits)
		}
		return nil
	})
	if err != nil {
		_ = vp.giveBack(ctx, ld.ledger, res.Batch)
		return nil, err
	}
	return vp, nil
}

// judge records one row's verdict.
func (vp *velocityPass) judge(r payfile.Row, col string, vr ledger.VelocityRow, verdict ledger.VelocityResult, file string, lim ledger.VelocityLimits) {
	switch {
	case verdict.Verdict == ledger.VelocityCounted:
		vp.exts = append(vp.exts, vr.ExternalID)
		vp.marks = append(vp.marks, ledger.VelocityMark(vp.day, vr.Tag))
		vp.tags[r.Line] = vr.Tag
	case verdict.Within():
		vp.tags[r.Line] = vr.Tag
	case vp.action == VelocityHold:
		vp.held[r.Line] = heldRow{ext: r.ExternalID, reason: verdict.Why(r.Destination(), r.Amount, lim, vp.scale), tag: vr.Tag}
	default:
		vp.over = append(vp.over, payfile.Error{File: file, Line: r.Line, Column: col, Kind: payfile.KindLimit,
			Message: verdict.Why(r.Destination(), r.Amount, lim, vp.scale)})
	}
}

// giveBack gives back the counts this pass made (a refused file).
func (vp *velocityPass) giveBack(ctx context.Context, l *ledger.Ledger, batch string) error {
	if vp == nil || len(vp.exts) == 0 {
		return nil
	}
	return l.Velocity().Uncount(ctx, batch, vp.exts, vp.marks)
}

// refuseOver applies a refusing pass to res: the rows over the limit
// become errors of their lines; without --partial the file is refused
// (false), with it those rows are left out (bad) and the rest loads.
func (vp *velocityPass) refuseOver(res *Result, bad *lineSet, partial bool) bool {
	if vp == nil || len(vp.over) == 0 {
		return true
	}
	res.Errors = mergeSorted(res.Errors, vp.over)
	if !partial {
		return false
	}
	for _, e := range vp.over {
		bad.add(e.Line)
		res.Valid--
	}
	res.Total = money.Zero // recomputed while loading
	return res.Valid > 0
}

// mark is the count a registered row records ("" when none).
func (vp *velocityPass) mark(line int) string {
	if vp == nil {
		return ""
	}
	if tag, ok := vp.tags[line]; ok {
		return ledger.VelocityMark(vp.day, tag)
	}
	return ""
}

// holds says whether the row on line is held over its recipient's limit
// (false without a velocity pass).
func (vp *velocityPass) holds(line int) bool {
	if vp == nil {
		return false
	}
	_, ok := vp.held[line]
	return ok
}

// holdOver holds the registered payouts over the limit (VelocityHold),
// before the batch is loaded: no task exists for them.
func (ld *Loader) holdOver(ctx context.Context, batch string, vp *velocityPass) (int, error) {
	if vp == nil {
		return 0, nil
	}
	n := 0
	for _, h := range vp.held {
		moved, err := ld.ledger.HoldOverVelocity(ctx, batch, h.ext, h.reason, h.tag)
		if err != nil {
			return n, err
		}
		if moved {
			n++
		}
	}
	return n, nil
}
