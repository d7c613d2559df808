package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/view"
)

// The operator names of the financial controls: the loader, the approver
// (never the loader: approve runs with --four-eyes) and the one who
// cancels.
const (
	approverName = "chaos-approver"
	cancelName   = "chaos-ops"
)

// controls is the state of the approvals and the cancel (Config.Approval).
type controls struct {
	autoBelow  string // --auto-approve-below ("" when every file waits)
	autoFile   string // the file that goes at once under it
	cancelFile string // the file some of whose payouts are cancelled

	seen      map[string]time.Time // batch awaiting approval -> first seen
	files     map[string]string    // batch -> file
	approved  map[string]bool
	nextTry   map[string]time.Time // after an approve or cancel that could not reach Redis
	cancelled bool                 // the cancel ran

	asked    map[string]bool // externalIds the suite asked to cancel
	reported int             // payouts payout cancel reported cancelled
	nApprove int             // batches approved by the suite
}

// planControls picks, when there are several files, the file with the
// smallest total to go under --auto-approve-below, and the file whose
// payouts are partly cancelled: the first one that waits.
func (h *harness) planControls() {
	c := &h.ctl
	c.seen, c.files, c.approved, c.nextTry = map[string]time.Time{}, map[string]string{}, map[string]bool{}, map[string]time.Time{}
	c.asked = map[string]bool{}
	if !h.cfg.Approval {
		return
	}
	totals := make([]money.Amount, len(h.files))
	minI := 0
	for i, f := range h.files {
		for _, r := range f.Rows {
			totals[i] = totals[i].Add(r.Amount)
		}
		if totals[i].Cmp(totals[minI]) < 0 {
			minI = i
		}
	}
	if len(h.files) > 1 {
		// Strictly below: only the smallest total (and a tie, very
		// unlikely) goes at once.
		c.autoBelow = totals[minI].Add(money.FromMinor(1, 2)).StringFixed(2)
		c.autoFile = h.files[minI].Name
	}
	for i, f := range h.files {
		if totals[i].Cmp(totals[minI]) != 0 || len(h.files) == 1 {
			c.cancelFile = f.Name
			break
		}
	}
	if h.cfg.Cancels > 0 && c.cancelFile != "" {
		var rows []Row
		for _, f := range h.files {
			if f.Name == c.cancelFile {
				rows = f.Rows
			}
		}
		rng := mrand.New(mrand.NewPCG(uint64(h.cfg.Seed), 0xca9ce1)) // the run's own rng keeps its sequence
		for _, i := range rng.Perm(len(rows)) {
			if len(c.asked) == h.cfg.Cancels {
				break
			}
			c.asked[rows[i].ExternalID] = true
		}
	}
	h.logf("approval required (loaded by the spool's delivery account); %s goes at once below %s; %d payouts of %s are cancelled before its approval",
		orNone(c.autoFile), orNone(c.autoBelow), len(c.asked), orNone(c.cancelFile))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// loaderApprovalArgs are the approval flags of every loader run.
func (h *harness) loaderApprovalArgs() []string {
	if !h.cfg.Approval {
		return nil
	}
	// A spool file is loaded by its delivery account (a system identity),
	// whoever runs the loader.
	args := []string{"--approval", "required"}
	if h.ctl.autoBelow != "" {
		args = append(args, "--auto-approve-below", h.ctl.autoBelow)
	}
	return args
}

// sawAwaiting records the batches awaiting approval found by a ledger poll.
func (h *harness) sawAwaiting(st []view.BatchStatus) {
	for _, s := range st {
		h.ctl.files[s.ID] = s.File
		if s.Phase == lifecycle.PhaseAwaiting {
			if _, ok := h.ctl.seen[s.ID]; !ok {
				h.ctl.seen[s.ID] = time.Now()
				h.logf("batch %s (%s) awaits approval", s.ID, s.File)
			}
		}
	}
}

// approveDue approves, as a person would, every batch that has waited
// ApproveAfter; before the cancel file's batch it cancels part of its
// payouts.
func (h *harness) approveDue(ctx context.Context) error {
	for id, at := range h.ctl.seen {
		if h.ctl.approved[id] || time.Since(at) < h.cfg.ApproveAfter || time.Now().Before(h.ctl.nextTry[id]) {
			continue
		}
		if h.ctl.files[id] == h.ctl.cancelFile && len(h.ctl.asked) > 0 && !h.ctl.cancelled {
			if err := h.cancelPart(ctx, id); err != nil {
				return err
			}
			if !h.ctl.cancelled {
				continue
			}
		}
		if err := h.approve(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// opRun runs one operator command as the person named (SUDO_USER: the
// command acts as the operating system's user, and as SUDO_USER only when
// that is root; otherwise as the user running the chaos suite); exit 3
// (Redis away) asks for a retry.
func (h *harness) opRun(ctx context.Context, log, person string, args []string) (code int, out []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args = append(args, "--redis", h.redis.URL())
	env := append(append([]string(nil), h.env...), "SUDO_USER="+person)
	return runOnce(ctx, h.payoutBin, args, env, h.path(dirLogs, log), true)
}

func (h *harness) approve(ctx context.Context, id string) error {
	// Flags first: the flag package stops at the first argument.
	code, out, err := h.opRun(ctx, "approve.log", approverName, []string{"approve", "--four-eyes", "--log-format", "json", id})
	if err != nil {
		return fmt.Errorf("payout approve: %w", err)
	}
	switch code {
	case 0:
		h.ctl.approved[id] = true
		h.ctl.nApprove++
		h.logf("approved %s: %s", id, trimLine(out))
	case 1:
		// Not awaiting any more: an earlier attempt that could not say
		// so approved it.
		h.ctl.approved[id] = true
		h.ctl.nApprove++
		h.logf("approve %s: not awaiting approval any more (see logs/approve.log)", id)
	case 3:
		h.ctl.nextTry[id] = time.Now().Add(time.Second)
		h.logf("approve %s: Redis unreachable (exit 3); trying again", id)
	default:
		return fmt.Errorf("payout approve exited %d (see logs/approve.log)", code)
	}
	return nil
}

var cancelledRE = regexp.MustCompile(`: (\d+) payouts cancelled by `)

// cancelPart cancels the chosen payouts of a batch that awaits approval:
// all are still queued, so all must be cancelled.
func (h *harness) cancelPart(ctx context.Context, id string) error {
	args := []string{"cancel", "--note", "chaos: operator stops part of the batch before approving it", id}
	for _, r := range h.rows() {
		if h.ctl.asked[r.ExternalID] {
			args = append(args, r.ExternalID)
		}
	}
	code, out, err := h.opRun(ctx, "cancel.log", cancelName, args)
	if err != nil {
		return fmt.Errorf("payout cancel: %w", err)
	}
	switch code {
	case 0, 1: // 1: some not cancellable (already cancelled by a retry)
		m := cancelledRE.FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("payout cancel: no count in its output %q", trimLine(out))
		}
		n, _ := strconv.Atoi(string(m[1]))
		h.ctl.reported += n
		h.ctl.cancelled = true
		h.logf("cancelled %d of %d payouts of %s (exit %d) before approving it", n, len(h.ctl.asked), id, code)
	case 3:
		h.ctl.nextTry[id] = time.Now().Add(time.Second)
		h.logf("cancel in %s: Redis unreachable (exit 3); trying again", id)
	default:
		return fmt.Errorf("payout cancel exited %d (see logs/cancel.log)", code)
	}
	return nil
}

func trimLine(b []byte) string {
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}

// readAudit reads an outbox NAME.audit.jsonl file.
func readAudit(path string) ([]ledger.AuditEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledger.AuditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e ledger.AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
