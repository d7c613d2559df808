package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/proof/redisdump"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/results"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
)

// finish writes the last result files, stops the workers, gathers the
// books, scans for leaks and computes the figures.
func (h *harness) finish(ctx context.Context) (Figures, error) {
	if err := h.lastLoads(ctx); err != nil {
		return Figures{}, err
	}
	h.snapshotUI(ctx, "end")
	h.waitEvents(ctx)
	h.stopWorkers()
	books, stats, life, err := h.gatherBooks(ctx)
	if err != nil {
		return Figures{}, err
	}
	var ev EventCheck
	if h.events != nil {
		ev = h.checkEvents(ctx, books)
	}
	var apiIDs []string
	if h.api != nil {
		if apiIDs, err = h.apiBatches(ctx); err != nil {
			return Figures{}, err
		}
	}
	drops, err := h.stopServices(ctx)
	if err != nil {
		return Figures{}, err
	}
	repaired, err := h.countRepairs()
	if err != nil {
		return Figures{}, err
	}

	leaks, scanned, err := h.scan()
	if err != nil {
		return Figures{}, err
	}
	v := Verify(books)
	var forged int
	if h.forge != nil {
		forged = h.forge.total()
		// A callback with a wrong secret that a worker did not refuse is
		// a broken promise of its own.
		for _, b := range h.forge.breaches() {
			v.Mismatches++
			v.Findings = append(v.Findings, "mismatch: forged callback not refused: "+b)
		}
	}
	fig := Figures{
		Payouts: len(books.Rows), Created: v.Created, Paid: v.Paid, Failed: v.Failed, Rejected: v.Rejected, NeedsReview: v.NeedsReview,
		Ambiguous: v.Ambiguous, WorkerKills: h.kills, RedisRestarts: h.restarts, TokenRotations: h.rotations,
		H2Resets: h.gw.H2Resets(), RedisReplyDrops: drops, TasksDeleted: h.tasksDeleted + h.tasksArchived, Repaired: repaired,
		InterruptedLoads: h.interruptedLoads, OrphanedTasks: h.orphaned,
		ForgedCallbacks: forged, Approved: h.ctl.nApprove, Cancelled: v.Cancelled, AuditMismatches: v.AuditMismatches,
		Duplicates: v.Duplicates, Lost: v.Lost, OutcomeMismatches: v.OutcomeMismatches, Leaks: len(leaks), Mismatches: v.Mismatches,
		Elapsed: time.Since(h.start),
	}
	if h.events != nil {
		fig.EventsChecked = true
		fig.Events, fig.EventDeliveries, fig.EventDuplicates, fig.EventRetries = ev.Events, ev.Deliveries, ev.Duplicates, ev.Retries
		fig.EventsMissing, fig.EventMismatches, fig.VerifierRejected = ev.Missing, ev.Mismatches, ev.Rejected
	}
	if h.api != nil {
		ev.Findings = append(ev.Findings, h.checkAPI(apiIDs, &fig)...)
	}
	h.logRun(stats, life, scanned, repaired)
	h.writeFindings(append(v.Findings, ev.Findings...), leaks)
	fmt.Fprintln(h.out, fig.String())
	return fig, nil
}

// lastLoads runs the loader until every batch has its result file (the
// loader writes one once a batch has no open row), for up to 30 s; once
// the run's deadline passed with rows open, once, without waiting.
func (h *harness) lastLoads(ctx context.Context) error {
	within := 30 * time.Second
	if h.open > 0 {
		within = 0 // the deadline passed: one last run, no waiting
	}
	h.finishing = true // no more interrupted loads
	if err := testenv.Poll(ctx, within, 500*time.Millisecond, func() (bool, error) {
		r := <-h.startLoader(ctx)
		if err := h.loaderDone(ctx, r); err != nil {
			return false, err
		}
		return h.allResultFiles(), nil
	}); err != nil && !errors.Is(err, testenv.ErrDeadline) {
		return err
	}
	return nil
}

// stopWorkers waits for the forged callbacks, then stops every worker.
func (h *harness) stopWorkers() {
	if h.forge != nil {
		h.forge.wait()
	}
	for _, w := range h.workers {
		_ = w.Signal(syscall.SIGTERM) // all at once, then wait for each
	}
	for _, w := range h.workers {
		w.Stop(h.cfg.PSPTimeout + 10*time.Second)
	}
}

// gatherBooks reads what the sandbox and the ledger hold at the end.
func (h *harness) gatherBooks(ctx context.Context) (Books, sandbox.Stats, sandbox.LifecycleJSON, error) {
	var books Books
	books.Rows = h.rows()
	adm := h.sandboxAdmin()
	var err error
	if books.Orders, err = adm.Orders(ctx); err != nil {
		return books, sandbox.Stats{}, sandbox.LifecycleJSON{}, err
	}
	stats, err := adm.Stats(ctx)
	if err != nil {
		return books, stats, sandbox.LifecycleJSON{}, err
	}
	life, err := adm.Lifecycle(ctx)
	if err != nil {
		return books, stats, life, err
	}
	books.PaidStatus, books.FailedStatus = life.PaidStatus, life.FailedStatus
	books.CancelAsked, books.CancelReported, books.CheckAudit = h.ctl.asked, h.ctl.reported, true
	if books.Payouts, books.Files, err = h.readLedger(ctx); err != nil {
		return books, stats, life, err
	}
	var audited, entries int
	for _, fc := range books.Files {
		if fc.AuditFile {
			audited++
			entries += len(fc.Audit)
		}
	}
	h.logf("audit files: %d of %d batches have theirs in the outbox, %d entries in all", audited, len(books.Files), entries)
	h.logf("archive: %d of %d batches archived during the run (--archive-after %s), read back from their archives", h.archived, len(books.Files), h.cfg.ArchiveAfter)
	return books, stats, life, nil
}

// stopServices writes Redis's contents to redis-contents.txt, then stops
// the UIs, the sandbox, Redis and the gateways; it returns how many Redis
// replies the fault proxy dropped.
func (h *harness) stopServices(ctx context.Context) (drops int, err error) {
	dump, err := redisdump.Text(ctx, h.rdb)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(h.path("redis-contents.txt"), []byte(dump), 0o600); err != nil {
		return 0, err
	}
	for _, u := range []*proc.Proc{h.ui, h.ops} {
		if u != nil {
			u.Stop(5 * time.Second)
		}
	}
	h.sandbox.Stop(10 * time.Second)
	_ = h.rdb.Close()
	h.redis.Stop(10 * time.Second)
	h.gw.Close()
	if h.rfault != nil {
		drops = int(h.rfault.Drops())
		_ = h.rfault.Close()
	}
	return drops, nil
}

// logRun logs what the sandbox, the forwarder and the harness saw.
func (h *harness) logRun(stats sandbox.Stats, life sandbox.LifecycleJSON, scanned, repaired int) {
	h.logf("sandbox: %d creates received, %d orders stored, %d status queries, answers %v",
		stats.CreatesReceived, stats.OrdersStored, stats.StatusQueries, stats.Answers)
	if h.cfg.Tracking() {
		h.logf("sandbox lifecycle: orders settle after %s as %q or %q; %d paid, %d failed; callbacks: %d delivered, %d dropped after retries",
			life.SettleAfter, life.PaidStatus, life.FailedStatus, stats.Paid, stats.Failed, stats.CallbacksSent, stats.CallbacksFailed)
	}
	if h.fwd != nil {
		recv, answers, undelivered := h.fwd.Stats()
		h.logf("callback forwarder: %d received from the sandbox, worker answers %v, %d found no live worker (the sandbox retried them)",
			recv, answers, undelivered)
		h.logf("forged callbacks sent to the workers: %s", h.forge.summary())
	}
	h.logf("harness: %d loader runs (%d while Redis was away), %d workers exited on their own, %d queue pauses, %d requests refused by the token gateway, %d files scanned for leaks",
		h.loaderRuns, h.loaderInfra, h.workerExits, h.pauses, h.gw.Refused(), scanned)
	h.logf("operator through the web UI: %d tasks deleted, %d archived; the workers restored %d steps",
		h.tasksDeleted, h.tasksArchived, repaired)
}

// writeFindings writes the findings and the leaks (the first maxExamples)
// to findings.txt and logs them.
func (h *harness) writeFindings(findings []string, leaks []Leak) {
	var lines []string
	lines = append(lines, findings...)
	for i, l := range leaks {
		if i == maxExamples {
			lines = append(lines, fmt.Sprintf("leak: ... %d in all", len(leaks)))
			break
		}
		lines = append(lines, "leak: "+l.String())
	}
	if len(lines) > 0 {
		_ = os.WriteFile(h.path("findings.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
		for _, l := range lines {
			h.logf("FINDING %s", l)
		}
	}
}

// repairMessages are the log messages of a worker that restored a lost
// step: its reconciler's sweep, or a handler that found a due step's task
// completed or archived.
var repairMessages = [][]byte{
	[]byte(`"reconciler restored a lost task"`),
	[]byte(`was due again; restored it"`),
}

// countRepairs counts the repairs in the workers' logs (a SIGKILLed
// worker's metrics die with it; its log stays).
func (h *harness) countRepairs() (int, error) {
	logs, err := filepath.Glob(h.path(dirLogs, "worker-*.log"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return 0, err
		}
		for _, m := range repairMessages {
			n += bytes.Count(b, m)
		}
	}
	return n, nil
}

func (h *harness) rows() []Row {
	var rows []Row
	for _, f := range h.files {
		rows = append(rows, f.Rows...)
	}
	return rows
}

// allResultFiles reports whether every batch has its result file.
func (h *harness) allResultFiles() bool {
	st, err := h.statuses(context.Background())
	if err != nil {
		return false
	}
	for _, s := range st {
		if !s.Reported {
			return false
		}
	}
	return len(st) > 0
}

// readLedger reads every payout of every batch, and checks each file's
// batch report (`payout report --format json`) and result file.
func (h *harness) readLedger(ctx context.Context) (map[string]ledger.Payout, []FileCheck, error) {
	st, err := view.New(h.led.Redis()).Statuses(ctx)
	if err != nil {
		return nil, nil, err
	}
	payouts := map[string]ledger.Payout{}
	byFile := map[string]view.BatchStatus{}
	// Archived batches (the loader's aggressive --archive-after): their
	// payouts from the archive file, then whatever Redis still holds.
	arch, err := h.led.Archive().ArchivedBatches(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range arch {
		byFile[a.File] = view.BatchStatus{Batch: a.Batch, Counts: a.Counts}
		if err := readArchived(a, payouts); err != nil {
			return nil, nil, err
		}
	}
	h.archived = len(arch)
	for _, s := range st {
		byFile[s.File] = s
		if err := view.New(h.led.Redis()).Each(ctx, s.ID, func(p ledger.Payout) error {
			if p.ExternalID != "" { // "": deleted by an archive run
				payouts[p.ExternalID] = p
			}
			return nil
		}); err != nil {
			return nil, nil, err
		}
	}
	var checks []FileCheck
	for _, f := range h.files {
		fc := FileCheck{File: f.Name}
		s, ok := byFile[f.Name]
		if ok {
			fc.Batch = s.ID
			h.checkReport(ctx, &fc)
			for _, base := range []string{f.Name, f.Name + "." + s.ID} {
				if _, err := os.Stat(h.path(dirSpool, "outbox", base+".result.csv")); err == nil {
					fc.ResultFile = true
				}
				if entries, err := readAudit(h.path(dirSpool, "outbox", base+".audit.jsonl")); err == nil {
					fc.AuditFile, fc.Audit = true, entries
				} else if !errors.Is(err, os.ErrNotExist) {
					fc.AuditFile, fc.AuditProblem = true, err.Error()
				}
			}
		}
		checks = append(checks, fc)
	}
	return payouts, checks, nil
}

// readArchived adds the payouts of archived batch a, read from its
// archive file, to payouts. A missing archive is an error: the summary of
// an archived batch is written only after its archive (package archive),
// so its payouts were lost.
func readArchived(a ledger.ArchivedBatch, payouts map[string]ledger.Payout) error {
	err := results.EachArchivedPayout(a.Archive, func(f map[string]string) error {
		p := ledger.PayoutFromFields(a.ID, f)
		payouts[p.ExternalID] = p
		return nil
	})
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("batch %s is archived but its archive %s is missing: its payouts are lost: %w", a.ID, a.Archive, err)
	case err != nil:
		return fmt.Errorf("archive %s of batch %s: %w", a.Archive, a.ID, err)
	}
	return nil
}

// checkReport runs `payout report BATCH --format json` into reports/.
func (h *harness) checkReport(ctx context.Context, fc *FileCheck) {
	out := h.path(dirReports, fc.Batch+".json")
	// Flags first: the flag package stops at the first argument.
	code, _, err := runOnce(ctx, h.payoutBin, []string{"report", "--format", "json", "--out", out,
		"--redis", h.redis.URL(), "--log-format", "json", fc.Batch}, h.env, h.path(dirLogs, "report.log"), false)
	switch {
	case err != nil:
		fc.Problem = "payout report: " + err.Error()
		return
	case code != 0 && code != 1: // 1: rejected rows, or not reconciled (read below)
		fc.Problem = fmt.Sprintf("payout report exited %d", code)
		return
	}
	b, err := os.ReadFile(out)
	if err != nil {
		fc.Problem = "payout report: " + err.Error()
		return
	}
	var rep struct {
		Summary struct {
			Reconciled bool `json:"reconciled"`
			Final      bool `json:"final"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		fc.Problem = "payout report: " + err.Error()
		return
	}
	fc.Reconciled, fc.Final = rep.Summary.Reconciled, rep.Summary.Final
}

// scan looks for every full card number of the run and every secret in
// every file the run wrote, except the payout files and secret files. It
// first proves on those that it finds what it looks for.
func (h *harness) scan() ([]Leak, int, error) {
	cards := map[string]bool{}
	for _, r := range h.rows() {
		if r.Card != "" {
			cards[r.Card] = true
		}
	}
	secrets := map[string]string{
		"PSP token (before rotation)": h.tokens[0],
		"PSP token (after rotation)":  h.tokens[1],
		"sandbox token":               h.sandboxToken,
		"web UI password":             h.uiPass,
		"data key":                    h.dataKey,
	}
	if h.callbackSecret != "" {
		secrets["callback secret"] = h.callbackSecret
	}
	if h.api != nil {
		secrets["API token"] = h.api.token
	}
	if h.webhookSecret != "" {
		secrets["webhook secret"] = h.webhookSecret
	}
	s := NewScanner(slices.Collect(maps.Keys(cards)), secrets)

	// Positive control: the payout files hold every card number (some
	// grouped), the secret files the current token and the data key.
	control, _, err := s.ScanTree(h.dir, func(rel string) bool {
		return rel != dirSpool && rel != dirSpool+"/done" && rel != dirSecrets && !strings.HasPrefix(rel, dirSpool+"/done/") && !strings.HasPrefix(rel, dirSecrets+"/")
	})
	if err != nil {
		return nil, 0, err
	}
	found := map[string]bool{}
	for _, l := range control {
		found[l.What] = true
	}
	missed, controlled := 0, 0
	for _, r := range h.rows() {
		if r.Card == "" || h.api != nil && r.File == h.api.file {
			continue // the API's file never was in the spool
		}
		controlled++
		if !found["card "+card.Mask(r.Card)] {
			missed++
		}
	}
	current := "PSP token (before rotation)"
	if h.rotations > 0 {
		current = "PSP token (after rotation)"
	}
	if missed > 0 || !found[current] || !found["data key"] {
		h.problem("leak scan control: the scanner missed %d of %d card numbers in the loaded payout files, found the token file %t and the data key file %t: it cannot be trusted",
			missed, controlled, found[current], found["data key"])
	}
	return s.ScanTree(h.dir, func(rel string) bool { return skipScan[rel] })
}
