package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
)

// rotation is the state of the token rotation.
type rotation struct {
	phase   int // 0 not begun, 1 both tokens accepted, 2 done
	written time.Time
}

// schedule is the state of drive: what has happened so far and when the
// next event of each kind is due.
type schedule struct {
	dropped    int
	loader     <-chan loaderResult
	lastLoad   time.Time
	nextKill   time.Duration
	nextDelete time.Duration
	nextOrphan time.Duration
	nextForge  time.Duration
	restarted  bool
	rot        rotation
	uiMidAt    time.Duration
	uiMidDone  bool
	finalSince time.Time
}

// drive runs the schedule until every payout is final and every planned
// event happened, or the deadline passes (testenv.ErrDeadline).
func (h *harness) drive(ctx context.Context) error {
	c := h.cfg
	s := &schedule{nextKill: c.KillEvery, nextDelete: c.TaskDeleteEvery, nextForge: c.ForgeEvery, nextOrphan: c.OrphanEvery,
		restarted: c.RedisRestartAt == 0, uiMidAt: c.ChaosFor * 2 / 3}
	if c.RotateAt == 0 {
		s.rot.phase = 2
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	defer func() {
		if s.loader != nil {
			<-s.loader
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		el := time.Since(h.start)
		if err := h.step(ctx, s, el); err != nil {
			return err
		}
		if h.finished(s) {
			h.logf("every payout is final: %d registered", h.registered)
			return nil
		}
		if el >= c.Deadline {
			h.logf("deadline of %s passed with %d payouts open, %d of %d registered", c.Deadline, h.open, h.registered, c.Rows)
			return testenv.ErrDeadline
		}
	}
}

// step does what is due at el: files, loader runs, worker supervision,
// the chaos events, then the ledger poll and approvals.
func (h *harness) step(ctx context.Context, s *schedule, el time.Duration) error {
	if err := h.dropDue(ctx, s, el); err != nil {
		return err
	}
	if err := h.tendLoader(ctx, s); err != nil {
		return err
	}
	if err := h.superviseWorkers(); err != nil {
		return err
	}
	if err := h.chaosDue(ctx, s, el); err != nil {
		return err
	}
	if time.Since(h.lastPoll) >= time.Second {
		h.lastPoll = time.Now()
		h.pollLedger(ctx)
	}
	if err := h.approveDue(ctx); err != nil {
		return err
	}
	if time.Since(h.lastProgress) >= 10*time.Second {
		h.lastProgress = time.Now()
		h.logf("progress: dropped %d/%d files, %d/%d payouts registered, %d open, %d worker kills",
			s.dropped, len(h.files), h.registered, h.cfg.Rows, h.open, h.kills)
	}
	return nil
}

// dropDue drops the files due by el into the inbox (the API's file: it
// starts its submission).
func (h *harness) dropDue(ctx context.Context, s *schedule, el time.Duration) error {
	for s.dropped < len(h.files) && el >= time.Duration(s.dropped)*h.cfg.DropEvery {
		f := h.files[s.dropped]
		if h.api != nil && f.Name == h.api.file {
			h.logf("submitting %s (%d rows) through payout api", f.Name, len(f.Rows))
			s.dropped++
			go h.submitAPI(ctx, f)
			continue
		}
		if err := h.drop(f); err != nil {
			return err
		}
		h.logf("dropped %s (%d rows) into the inbox", f.Name, len(f.Rows))
		s.dropped++
	}
	return nil
}

// tendLoader accounts for a finished loader run and starts the next one
// every LoaderEvery, as cron would.
func (h *harness) tendLoader(ctx context.Context, s *schedule) error {
	if s.loader != nil {
		select {
		case r := <-s.loader:
			s.loader = nil
			if err := h.loaderDone(ctx, r); err != nil {
				return err
			}
		default:
		}
	}
	if s.loader == nil && time.Since(s.lastLoad) >= h.cfg.LoaderEvery {
		s.lastLoad = time.Now()
		s.loader = h.startLoader(ctx)
	}
	return nil
}

// chaosDue plays the events due at el: worker kills and task deletions
// (during ChaosFor), forged callbacks, the Redis restart, the token
// rotation and the mid-run UI snapshot.
func (h *harness) chaosDue(ctx context.Context, s *schedule, el time.Duration) error {
	c := h.cfg
	if c.KillEvery > 0 && el < c.ChaosFor && el >= s.nextKill {
		s.nextKill += c.KillEvery
		if err := h.killWorker(); err != nil {
			return err
		}
	}
	if c.TaskDeleteEvery > 0 && el < c.ChaosFor && el >= s.nextDelete {
		s.nextDelete += c.TaskDeleteEvery
		h.deleteTasks(ctx)
	}
	if c.OrphanEvery > 0 && el < c.ChaosFor && el >= s.nextOrphan {
		s.nextOrphan += c.OrphanEvery
		h.orphanActive(ctx)
	}
	if h.forge != nil && c.ForgeEvery > 0 && s.dropped > 0 && el >= s.nextForge {
		s.nextForge += c.ForgeEvery
		h.forgeCallback(ctx, s.dropped)
	}
	if !s.restarted && el >= c.RedisRestartAt {
		s.restarted = true
		if err := h.restartRedis(ctx); err != nil {
			return err
		}
	}
	if err := h.rotate(&s.rot, el); err != nil {
		return err
	}
	if !s.uiMidDone && el >= s.uiMidAt {
		s.uiMidDone = true
		h.snapshotUI(ctx, "mid")
	}
	return nil
}

// restartRedis kills Redis and starts it again on the same AOF, checking
// that no registered payout was lost.
func (h *harness) restartRedis(ctx context.Context) error {
	before, _ := h.registeredNow(ctx)
	t := time.Now()
	if err := h.redis.Restart(ctx); err != nil {
		return fmt.Errorf("redis restart: %w", err)
	}
	h.restarts++
	after, err := h.registeredNow(ctx)
	h.logf("redis killed -9 and started again on the same AOF; answering after %s with %d payouts registered (%d before)",
		time.Since(t).Round(time.Millisecond), after, before)
	if err == nil && after < before {
		h.problem("the Redis restart lost %d registered payouts: the AOF did not keep them", before-after)
	}
	return nil
}

// finished reports whether the run is over: every file dropped and
// loaded, every payout final and every planned event played, for two
// polls in a row (a poll is not fooled by a batch whose rows are being
// registered).
func (h *harness) finished(s *schedule) bool {
	settled := s.dropped == len(h.files) && h.spoolSettled() && h.batchesReady > 0 &&
		(h.registered == int64(h.cfg.Rows) || h.anyFailed()) &&
		h.open == 0 && s.restarted && s.rot.phase == 2 && s.uiMidDone
	switch {
	case settled && s.finalSince.IsZero():
		s.finalSince = time.Now()
	case !settled:
		s.finalSince = time.Time{}
	}
	return settled && time.Since(s.finalSince) >= 1500*time.Millisecond
}

// forgeCallback sends one forged callback to a random live worker, about a
// random row of the files dropped so far (or an unknown order).
func (h *harness) forgeCallback(ctx context.Context, dropped int) {
	addrs := h.liveCallbackAddrs()
	if len(addrs) == 0 {
		return
	}
	f := h.files[h.rng.IntN(dropped)]
	row := f.Rows[h.rng.IntN(len(f.Rows))]
	h.forge.send(ctx, h.rng, addrs[h.rng.IntN(len(addrs))], row.ExternalID)
}

// loaderDone accounts for a finished loader run. Exit 0 and 1 are normal
// (1: the batch has rejected rows), 3 means Redis was unreachable (the
// restart): the next run resumes. Anything else is a harness failure.
func (h *harness) loaderDone(ctx context.Context, r loaderResult) error {
	h.loaderRuns++
	switch {
	case r.killed != "":
		h.interruptedLoads++
		h.checkInterrupted(ctx, r.killed)
	case r.err != nil:
		return fmt.Errorf("payout load: %w", r.err)
	case r.code == 0 || r.code == 1:
	case r.code == 3:
		h.loaderInfra++
		h.logf("loader run %d: Redis unreachable (exit 3); the next run resumes", h.loaderRuns)
	default:
		return fmt.Errorf("payout load exited %d (see logs/loader.log)", r.code)
	}
	return nil
}

// superviseWorkers replaces workers that ended on their own (a worker
// started while Redis restarts exits 3), as systemd would. A worker that
// refuses its configuration (exit 2) ends the run.
func (h *harness) superviseWorkers() error {
	for i := 0; i < len(h.workers); i++ {
		p := h.workers[i]
		if !p.Exited() {
			continue
		}
		if p.ExitCode() == 2 {
			return fmt.Errorf("%s refused its configuration (exit 2, see logs/%s.log)", p.Name(), p.Name())
		}
		h.workerExits++
		if h.workerExits > 20*h.cfg.Workers {
			return fmt.Errorf("workers keep exiting on their own (%d times; see logs/)", h.workerExits)
		}
		h.logf("%s exited on its own (code %d); starting another", p.Name(), p.ExitCode())
		h.workers = append(h.workers[:i], h.workers[i+1:]...)
		i--
		if err := h.startWorker(h.skewed[p]); err != nil {
			return err
		}
	}
	return nil
}

// killWorker SIGKILLs a random worker and starts another.
func (h *harness) killWorker() error {
	if len(h.workers) == 0 {
		return nil
	}
	i := h.rng.IntN(len(h.workers))
	p := h.workers[i]
	p.Kill()
	h.kills++
	h.workers = append(h.workers[:i], h.workers[i+1:]...)
	if err := h.startWorker(h.skewed[p]); err != nil {
		return err
	}
	h.logf("killed %s with SIGKILL; started %s", p.Name(), h.workers[len(h.workers)-1].Name())
	return nil
}

// rotate plays a token rotation: the PSP accepts the old and the new token,
// the new one is written to the workers' token file, and once no request
// has come with the old one for a second the old one is revoked.
func (h *harness) rotate(r *rotation, el time.Duration) error {
	switch {
	case r.phase == 0 && el >= h.cfg.RotateAt:
		h.gw.Accept(h.tokens[0], h.tokens[1])
		if err := writeSecret(h.tokenFile, h.tokens[1]); err != nil {
			return err
		}
		r.phase, r.written = 1, time.Now()
		h.logf("PSP token rotation: new token accepted and written to the workers' token file")
	case r.phase == 1:
		_, lastOld := h.gw.Used(h.tokens[0])
		if time.Since(r.written) >= time.Second && time.Since(lastOld) >= time.Second {
			h.gw.Accept(h.tokens[1])
			n, _ := h.gw.Used(h.tokens[1])
			r.phase = 2
			h.rotations++
			h.logf("PSP token rotation: old token revoked (%d requests with the new one so far)", n)
		} else if time.Since(r.written) > 30*time.Second {
			return errRotation
		}
	}
	return nil
}

// pollLedger reads the batch counters and resumes a paused queue (as an
// operator would after a 401); errors (Redis restarting) skip the poll.
func (h *harness) pollLedger(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := h.statuses(pctx)
	if err != nil {
		return
	}
	h.sawAwaiting(st)
	var reg, open, ready int64
	for _, s := range st {
		reg += s.Counts.Total()
		open += s.Counts.Open()
		if s.Phase == lifecycle.PhaseLoaded {
			ready++
		}
		if s.Phase != lifecycle.PhaseLoaded {
			open++ // a batch still loading is not final
		}
	}
	h.registered, h.open, h.batchesReady = reg, open, ready
	if info, err := h.insp.GetQueueInfo(jobs.Queue); err == nil && info.Paused {
		h.pauses++
		h.logf("the payout queue is PAUSED (a worker saw an auth failure); resuming it as an operator would")
		if err := h.insp.UnpauseQueue(jobs.Queue); err != nil {
			h.logf("resume failed: %v", err)
		}
	}
}

// statuses returns every batch in Redis and every archived batch (whose
// summary counts its payouts: archived, they are all final).
func (h *harness) statuses(ctx context.Context) ([]view.BatchStatus, error) {
	st, err := view.New(h.led.Redis()).Statuses(ctx)
	if err != nil {
		return nil, err
	}
	arch, err := h.led.Archive().ArchivedBatches(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, s := range st {
		live[s.ID] = true
	}
	for _, a := range arch {
		if !live[a.ID] {
			b := a.Batch
			b.Reported = true // the archive wrote its result file
			st = append(st, view.BatchStatus{Batch: b, Counts: a.Counts})
		}
	}
	return st, nil
}

// registeredNow counts the payouts of every batch in the ledger,
// archived ones included.
func (h *harness) registeredNow(ctx context.Context) (int64, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := h.statuses(pctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range st {
		n += s.Counts.Total()
	}
	return n, nil
}

// spoolSettled reports whether the inbox and processing folders are empty.
func (h *harness) spoolSettled() bool {
	for _, sub := range []string{"inbox", "processing"} {
		entries, err := os.ReadDir(h.path(dirSpool, sub))
		if err != nil {
			return false
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				return false
			}
		}
	}
	return true
}

// anyFailed reports whether the loader refused a file.
func (h *harness) anyFailed() bool {
	entries, _ := os.ReadDir(h.path(dirSpool, "failed"))
	return len(entries) > 0
}

// checkInterrupted looks at a batch whose loader the suite killed mid-file:
// it must say "loading, interrupted" once the dead loader's lease expires,
// and none of its payouts may have gone past queued (no create for a batch
// whose load has not completed), however long the workers have had.
func (h *harness) checkInterrupted(ctx context.Context, batch string) {
	st, err := view.New(h.led.Redis()).Status(ctx, batch)
	if err != nil {
		h.logf("interrupted load of %s: status: %v", batch, err)
		return
	}
	h.logf("loader killed -9 in the middle of batch %s: %d of %d rows registered, phase %s", batch,
		st.Counts.Total(), st.Rows, st.State())
	if st.Phase != lifecycle.PhaseLoading {
		return // completed meanwhile by nobody: cannot happen, the lock is held
	}
	if moved := st.Counts.Total() - st.Counts.Rows[lifecycle.Queued]; moved > 0 {
		h.problem("%d payouts of the interrupted load of %s went past queued before the load completed", moved, batch)
	}
}

// orphanActive removes the lease entries of up to Orphans active tasks,
// leaving them in the active list in state active: the shape
// hibiken/asynq#1051 and #1144 report after Redis access was lost during a
// worker restart. Asynq's recoverer never sees such a task; the
// reconciler must restore its step. Errors (Redis restarting) skip the
// round.
func (h *harness) orphanActive(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ids, err := h.rdb.LRange(ctx, queue.ActiveKey(), 0, -1).Result()
	if err != nil {
		return
	}
	h.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids[:min(len(ids), h.cfg.Orphans)] {
		if n, err := h.rdb.ZRem(ctx, queue.LeaseKey(), id).Result(); err == nil && n == 1 {
			h.orphaned++
		}
	}
}
