//go:build integration

package worker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/proof/redisfault"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/internal/view"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// Asynq's enqueue and schedule scripts (hibiken/asynq internal/rdb): the
// proxy learns their source when go-redis falls back to EVAL.
const (
	asynqEnqueueScript  = `redis.call("LPUSH", KEYS[2], ARGV[2])`
	asynqScheduleScript = `redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])`
)

// TestReplyDropRunEndsFinal runs payouts against a PSP that answers
// ambiguously (stores the order, then answers badly), while the worker's Redis connection loses 20% of
// the replies of the ledger transitions and of the enqueues of follow-up
// tasks: each such command runs, its reply is thrown away and the
// connection cut, and go-redis (the autopipeliner for the ledger) sends it
// again. Every payout must still end final, with exactly one PSP order per
// created payout, none stranded.
func TestReplyDropRunEndsFinal(t *testing.T) {
	const n = 300
	cfg := fastConfig()
	cfg.Concurrency = 10
	cfg.StatusDelay = 200 * time.Millisecond
	cfg.Policy.AbsentSpacing = 600 * time.Millisecond // (K-1)*D must exceed the PSP status lag
	h := newHarness(t, cfg, sandbox.Config{Seed: 11, Faults: sandbox.Faults{
		PAmbiguous: 0.3, StatusLag: 400 * time.Millisecond, HangFor: time.Second}})
	ids := h.add(cards(n)...)

	ctx := context.Background()
	direct := h.rdb.(*redis.Client)
	// The harness's enqueues cached asynq's scripts: flush them, so that
	// the worker's first run of each is an EVAL the proxy learns from.
	if err := direct.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rules := []redisfault.Rule{
		// Every ledger transition names the payout's key.
		{Commands: []string{"EVALSHA", "EVAL"}, Contains: keys.Payout(h.batch, "") /* every payout key of the batch */, Probability: 0.2},
		{Commands: []string{"EVALSHA", "EVAL"}, Contains: asynqEnqueueScript, Probability: 0.2},
		{Commands: []string{"EVALSHA", "EVAL"}, Contains: asynqScheduleScript, Probability: 0.2},
	}
	proxy, err := redisfault.Start(redisfault.Config{Upstream: direct.Options().Addr, Rules: rules, Seed: 2026,
		Log: zerolog.New(h.logs).With().Str("component", "redisfault").Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	opt := *direct.Options()
	opt.Addr = proxy.Addr()
	wrdb := redis.NewClient(&opt)
	t.Cleanup(func() { wrdb.Close() })
	h.workerRDB = wrdb

	start := time.Now()
	h.start()
	open := waitSettled(t, h, ids, 3*time.Minute)
	h.stop()

	st := h.sbx.Stats()
	t.Logf("%d payouts in %s; replies dropped %d (transitions %d of %d, enqueues %d of %d, schedules %d of %d); "+
		"PSP creates %d, orders %d, status queries %d, answers %v",
		n, time.Since(start).Round(time.Millisecond), proxy.Drops(),
		proxy.RuleDrops(0), proxy.RuleMatches(0), proxy.RuleDrops(1), proxy.RuleMatches(1),
		proxy.RuleDrops(2), proxy.RuleMatches(2),
		st.CreatesReceived, st.OrdersStored, st.StatusQueries, st.Answers)
	if proxy.RuleDrops(0) == 0 {
		t.Error("no transition reply was dropped: the test proves nothing")
	}
	if len(open) > 0 {
		t.Errorf("%d of %d payouts stranded:\n%s", len(open), n, strings.Join(open, "\n"))
	}
	states := h.checkAgainstPSP(ids)
	t.Logf("states: %v", states)
	for s, c := range states {
		if s != lifecycle.Created && s != lifecycle.Rejected {
			t.Errorf("%d payouts ended %s, want created or rejected", c, s)
		}
	}
	// A payout in needs_review without a single create received by the PSP
	// lost its create budget to lost replies (see the report in the commit).
	shown := 0
	for _, ext := range ids {
		p := h.payout(ext)
		if p.State != lifecycle.NeedsReview {
			continue
		}
		t.Errorf("%s needs review after %d creates begun, %d received by the PSP: %s",
			ext, p.Creates, st.CreatesByExternalID[ext], p.Error)
		if shown++; shown <= 3 {
			t.Logf("history of %s:\n%s", ext, logsOf(h, ext))
		}
	}
}

// waitSettled polls until every payout of ids is final or the deadline
// passes, and describes those that are not, with their task in Asynq.
func waitSettled(t *testing.T, h *harness, ids []string, within time.Duration) []string {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		c, err := view.New(h.ledger.Redis()).Counts(ctx, h.batch)
		if err == nil && c.Total() == int64(len(ids)) && c.Open() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	tasks := map[string][]string{}
	for _, state := range []string{"pending", "active", "scheduled", "retry", "archived", "completed"} {
		for _, ti := range listTasks(h, state) {
			for _, ext := range ids {
				if strings.Contains(ti, ":"+ext+":") {
					tasks[ext] = append(tasks[ext], state+" "+ti)
				}
			}
		}
	}
	var open []string
	for _, ext := range ids {
		p := h.payout(ext)
		if p.State.Final() {
			continue
		}
		sort.Strings(tasks[ext])
		open = append(open, fmt.Sprintf("  %s %s creates=%d seq=%d misses=%d faults=%d updated=%s error=%q tasks=%v",
			ext, p.State, p.Creates, p.Seq, p.Misses, p.Faults, p.UpdatedAt.Format(time.RFC3339Nano), p.Error, tasks[ext]))
	}
	return open
}

// logsOf returns the log lines that name ext.
func logsOf(h *harness, ext string) string {
	var out []string
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, `"`+ext+`"`) || strings.Contains(line, ":"+ext+":") {
			out = append(out, "    "+line)
		}
	}
	return strings.Join(out, "\n")
}

// listTasks returns the ids of the payout queue's tasks in state.
func listTasks(h *harness, state string) []string {
	list := map[string]func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
		"pending": h.insp.ListPendingTasks, "active": h.insp.ListActiveTasks,
		"scheduled": h.insp.ListScheduledTasks, "retry": h.insp.ListRetryTasks,
		"archived": h.insp.ListArchivedTasks, "completed": h.insp.ListCompletedTasks,
	}[state]
	var ids []string
	for page := 1; ; page++ {
		infos, err := list(jobs.Queue, asynq.Page(page), asynq.PageSize(500))
		if err != nil || len(infos) == 0 {
			return ids
		}
		for _, ti := range infos {
			ids = append(ids, ti.ID)
		}
	}
}
