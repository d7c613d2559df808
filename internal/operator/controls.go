package operator

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/jobs"
)

// UIControls gives the web UI (ui.Controls) the operator's commands
// (commands.go), with the checks the UI was started with (payout ui
// --four-eyes, --daily-limit): it only translates the console's forms
// into the commands and their results and refusals into the UI's
// answers, so that the console says what the CLI says.
type UIControls struct {
	Actions    *Actions
	FourEyes   bool
	DailyLimit money.Amount
	// PSP is asked before a payout is marked created or rejected (Verify);
	// nil: those are refused, a recheck is not.
	PSP StatusChecker
	// OutcomeWindow is the outcome window of a payout marked created (the
	// workers' --outcome-window; 0: created is final).
	OutcomeWindow time.Duration
}

// answer is a command's outcome as the UI takes it: its words, a refusal
// (ui.Refuse, its words shown), the rest left to the system
// (ui.PartlyDone, the words shown as done) or a fault.
func answer(words string, err error) (string, error) {
	switch {
	case err == nil:
		return words, nil
	case errors.Is(err, ErrForbidden):
		return "", ui.Forbid(err)
	case errors.Is(err, ErrRefused):
		return "", ui.Refuse(err)
	case errors.Is(err, ErrNotEnqueued), errors.Is(err, ErrNextNotEnqueued):
		return words, ui.PartlyDone(err)
	}
	return "", err
}

// Approve approves the batch as payout approve does (Actions.Approve).
func (u UIControls) Approve(ctx context.Context, batch, by, note string) (string, error) {
	// The approval rule's role is checked against the signed-in person's
	// roles (the principal in ctx: Actions.Approve).
	r, err := u.Actions.Approve(ctx, batch, ledger.Approval{By: by, FourEyes: u.FourEyes, DailyLimit: u.DailyLimit, Note: note})
	return answer(r.Words(), err)
}

// ApprovalRules says the daily limit an approval is checked against
// (ui.ApprovalRules); four-eyes the UI says itself.
func (u UIControls) ApprovalRules() []string {
	if u.DailyLimit.IsZero() {
		return nil
	}
	return []string{"Daily limit: the approval is refused if it takes the sum approved today (UTC) above " + u.DailyLimit.String() + "."}
}

// Discard discards the batch as payout discard does (Actions.Discard).
func (u UIControls) Discard(ctx context.Context, batch, by, note string) (string, error) {
	r, err := u.Actions.Discard(ctx, batch, by, note)
	return answer(r.Words(), err)
}

// decisions are the console's payout decisions as resolutions.
var decisions = map[string]lifecycle.State{ui.DecideRecheck: lifecycle.Checking, ui.DecideCreated: lifecycle.Created, ui.DecideRejected: lifecycle.Rejected}

// DecidePayout takes a decision on one payout as payout cancel
// (Actions.Cancel) or payout resolve (Actions.Resolve: recheck, created,
// rejected) does.
func (u UIControls) DecidePayout(ctx context.Context, batch, ext string, d ui.Decision) (string, error) {
	switch d.Action {
	case ui.DecideCancel:
		r, err := u.Actions.Cancel(ctx, batch, ext, d.By, d.Note)
		return answer(r.Words(), err)
	case ui.DecideRelease:
		r, err := u.Actions.Release(ctx, batch, ext, d.By, d.Note)
		return answer(r.Words(), err)
	}
	to, ok := decisions[d.Action]
	if !ok {
		to = lifecycle.State(d.Action) // refused by Resolve
	}
	who := ledger.Resolution{By: d.By, Note: d.Note}
	if to == lifecycle.Created {
		who.OutcomeWindow = u.OutcomeWindow
	}
	r, err := u.Actions.Resolve(ctx, u.PSP, batch, ext, Resolution{To: to, OrderID: d.OrderID, PSPStatus: d.PSPStatus, Who: who, FourEyes: u.FourEyes})
	return answer(r.Words(), err)
}

// SwitchesQueue says that the payout queue's pause and resume made in
// the UI are the commands Pause and Resume.
func (u UIControls) SwitchesQueue(queue string) bool { return queue == jobs.Queue }

// SwitchQueue pauses (pause) or resumes the payout queue as payout pause
// and payout resume do; an audit or notification failure after the
// switch is left to the UI's log (ui.PartlyDone).
func (u UIControls) SwitchQueue(ctx context.Context, by string, pause bool) (string, error) {
	s := QueueSwitch{By: strings.TrimSpace(by), Note: "queue " + jobs.Queue + ", in the web UI", How: "the web UI"}
	var (
		r   SwitchedQueue
		err error
	)
	if pause {
		r, err = u.Actions.Pause(ctx, s)
	} else {
		r, err = u.Actions.Resume(ctx, s)
	}
	if err == nil && r.Unrecorded != nil {
		return r.Words(), ui.PartlyDone(r.Unrecorded)
	}
	return answer(r.Words(), err)
}

// QueueChanged records a pause or resume of another queue made in
// asynqmon (the notifications'); the note names the queue.
func (u UIControls) QueueChanged(ctx context.Context, queue, by string, paused bool) error {
	return u.Actions.QueueChanged(ctx, queue, by, "queue "+queue+", in the web UI", "the web UI", paused)
}
