//go:build integration

package clustertest

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	ledgerkeys "github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/sandbox"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// TestClusterChaos runs the loader and two worker processes against a
// 3-master Redis Cluster and the PSP simulator with faults on, then checks
// the result as a chaos run does: one PSP order per created payout with the
// right amount, none for the others, nothing left in flight, every report
// reconciled; and that the keys of a batch live in one slot.
func TestClusterChaos(t *testing.T) {
	const (
		files   = 4
		perFile = 500
		workers = 2
	)
	ctx := context.Background()
	start := time.Now()
	cl := redistest.StartCluster(t, 3)
	bins := Build(t)
	t.Logf("cluster %s up and binaries built in %s", cl.URL(), time.Since(start).Round(time.Millisecond))

	sb := StartSandbox(t, bins.Sandbox, "-seed", "7", "-p-ambiguous", "0.25", "-p-refuse", "0.1",
		"-status-lag", "2s", "-hang-for", "3s")
	cli := NewCLI(t, bins.Payout, cl.URL())
	paths, rows := WriteFiles(t, t.TempDir(), FileSpec{Files: files, PerFile: perFile, Seed: 7, DeclineEvery: 40, Prefix: "CT"})
	cli.Load(t, paths...)
	t.Logf("%d payouts in %d files loaded at %s", len(rows), files, time.Since(start).Round(time.Millisecond))

	var procs []*proc.Proc
	for i := 0; i < workers; i++ {
		procs = append(procs, cli.StartWorker(t, "worker-"+string(rune('a'+i)), sb.URL,
			"--concurrency", "20", "--status-delay", "1s", "--absent-spacing", "2s", "--psp-timeout", "2s"))
	}
	watch := func() {
		for _, p := range procs {
			if p.Exited() {
				t.Fatalf("%s exited early:\n%s", p.Name(), p.Tail(3000))
			}
		}
	}
	batches := cli.WaitFinal(t, files, 90*time.Second, watch)
	t.Logf("all payouts final at %s", time.Since(start).Round(time.Millisecond))
	archived := waitQueueDrained(t, cl, 30*time.Second, watch)
	for _, p := range procs {
		cpu := Stop(t, p, 40*time.Second)
		t.Logf("%s: %s CPU", p.Name(), cpu.Round(time.Millisecond))
	}

	// The PSP side.
	orders := map[string][]sandbox.Order{}
	all, err := sb.Orders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		if o.Kind == "withdrawal" {
			orders[o.ExternalID] = append(orders[o.ExternalID], o)
		}
	}
	st, err := sb.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox: %d creates received, %d orders stored, %d status queries, answers %v",
		st.CreatesReceived, st.OrdersStored, st.StatusQueries, st.Answers)
	faults := 0
	for code, n := range st.Answers {
		if code != "200" && code != "404" && code != "400" && code != "422" {
			faults += n
		}
	}
	if faults == 0 || st.Answers["404"] == 0 {
		t.Errorf("the simulator injected no faults or status misses (answers %v): the run proves nothing", st.Answers)
	}

	// The ledger side, through the reports.
	seen := map[string]bool{}
	states := map[string]int{}
	repeated := 0
	createdSum := money.Zero
	for _, b := range batches {
		rep := cli.Report(t, b.ID)
		if !rep.Summary.Reconciled || !rep.Summary.Final {
			t.Errorf("batch %s (%s): reconciled=%v final=%v: rows %d/%d total %s/%s", b.ID, b.File,
				rep.Summary.Reconciled, rep.Summary.Final, rep.Summary.Rows, rep.Summary.FileRows, rep.Summary.Total, rep.Summary.FileTotal)
		}
		if rep.Summary.Rows != perFile {
			t.Errorf("batch %s: %d rows, want %d", b.ID, rep.Summary.Rows, perFile)
		}
		for _, r := range rep.Rows {
			want, ok := rows[r.ExternalID]
			if !ok || seen[r.ExternalID] {
				t.Errorf("report row %s: unknown or repeated", r.ExternalID)
				continue
			}
			seen[r.ExternalID] = true
			states[r.State]++
			if r.Attempts > 1 {
				repeated++
			}
			got := orders[r.ExternalID]
			switch r.State {
			case "created":
				if want.Declined {
					t.Errorf("%s: created, but the simulator refuses it", r.ExternalID)
				}
				if len(got) != 1 {
					t.Errorf("%s: created with %d PSP orders, want exactly 1", r.ExternalID, len(got))
					continue
				}
				amt, err := money.Parse(got[0].Amount, 2)
				if err != nil || amt.Cmp(want.Amount) != 0 {
					t.Errorf("%s: PSP order amount %q, file says %s", r.ExternalID, got[0].Amount, want.Amount.StringFixed(2))
				}
				if got[0].PSPOrderID != r.PSPOrderID {
					t.Errorf("%s: ledger order id %q, PSP has %q", r.ExternalID, r.PSPOrderID, got[0].PSPOrderID)
				}
				createdSum = createdSum.Add(want.Amount)
			case "rejected", "needs_review":
				if r.State == "rejected" && !want.Declined {
					t.Errorf("%s: rejected (%s), but the simulator accepts it", r.ExternalID, r.Error)
				}
				if len(got) != 0 {
					t.Errorf("%s: %s but the PSP holds %d orders", r.ExternalID, r.State, len(got))
				}
				if r.State == "needs_review" {
					t.Logf("%s: needs_review after %d creates: %s", r.ExternalID, r.Attempts, r.Error)
				}
			default:
				t.Errorf("%s: state %q after the run", r.ExternalID, r.State)
			}
		}
	}
	if len(seen) != len(rows) {
		t.Errorf("reports hold %d payouts, files %d", len(seen), len(rows))
	}
	for ext := range orders {
		if _, ok := rows[ext]; !ok {
			t.Errorf("PSP order for unknown externalId %q", ext)
		}
	}
	t.Logf("states %v; %d payouts needed more than one create; created total %s", states, repeated, createdSum.StringFixed(2))
	// The worker archives the task of a payout it moves to needs_review (for
	// the web UI), and no other.
	if archived != states["needs_review"] {
		t.Errorf("%d archived tasks, %d payouts need review", archived, states["needs_review"])
	}
	if repeated == 0 {
		t.Errorf("no payout was created again after a confirmed absence: the refusals did not exercise that path")
	}

	checkSlots(t, cl, batches)
	checkNoCardInLogs(t, rows, append([]*proc.Proc{sb.Proc}, procs...))
	t.Logf("total %s", time.Since(start).Round(time.Millisecond))
}

// waitQueueDrained polls the Asynq queue on the cluster until no task is
// pending, active, scheduled or waiting for a retry (every status check left
// over from an ambiguous create has run) and returns the number of archived
// tasks.
func waitQueueDrained(t *testing.T, cl *redistest.Cluster, within time.Duration, tick func()) int {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(cl.Client(t))
	deadline := time.Now().Add(within)
	for {
		qi, err := insp.GetQueueInfo(jobs.Queue)
		if err != nil {
			t.Fatalf("asynq queue info on the cluster: %v", err)
		}
		if qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0 {
			t.Logf("queue %s drained: %d completed, %d archived", jobs.Queue, qi.Completed, qi.Archived)
			return qi.Archived
		}
		tick()
		if time.Now().After(deadline) {
			t.Fatalf("queue %s not drained after %s: pending %d active %d scheduled %d retry %d",
				jobs.Queue, within, qi.Pending, qi.Active, qi.Scheduled, qi.Retry)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkSlots asserts that the ledger keys of each batch and the Asynq keys
// each share one slot, and that the keyspace is spread over every master.
func checkSlots(t *testing.T, cl *redistest.Cluster, batches []BatchStatus) {
	t.Helper()
	ctx := context.Background()
	rdb := cl.Client(t)
	var mu sync.Mutex
	keys := map[string][]string{} // node addr -> keys
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		var ks []string
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			ks = append(ks, iter.Val())
		}
		mu.Lock()
		keys[c.Options().Addr] = ks
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatalf("scan masters: %v", err)
	}
	if len(keys) != len(cl.Nodes) {
		t.Errorf("scanned %d masters, want %d", len(keys), len(cl.Nodes))
	}
	for addr, ks := range keys {
		if len(ks) == 0 {
			t.Errorf("master %s holds no key: the data did not spread over the cluster", addr)
		}
		t.Logf("master %s: %d keys", addr, len(ks))
	}
	groups := map[string][]string{} // "batch B" / "asynq" -> keys
	for _, ks := range keys {
		for _, k := range ks {
			switch {
			case strings.HasPrefix(k, "asynq:{payouts}:"):
				groups["asynq"] = append(groups["asynq"], k)
			default:
				if b, ok := ledgerkeys.BatchOf(k); ok {
					groups["batch "+b] = append(groups["batch "+b], k)
				}
			}
		}
	}
	for _, b := range batches {
		ks := groups["batch "+b.ID]
		// A hash per payout; then meta, counts, audit, the list of line
		// chunks and one chunk per 128 file lines (at least one), and the
		// console's index of each state but queued that holds payouts. The
		// event outbox, the watch of paid payouts and the scheduled set
		// exist only while they hold something, so they may or may not be
		// there when the run ends.
		required := map[string]bool{
			ledgerkeys.Meta(b.ID): true, ledgerkeys.Counts(b.ID): true,
			ledgerkeys.Audit(b.ID): true, ledgerkeys.LineChunks(b.ID): true,
		}
		for k := int64(0); k <= int64(b.Rows+1)/ledgerkeys.LineChunk; k++ {
			required[ledgerkeys.LineChunkOf(b.ID, k)] = true
		}
		for _, st := range lifecycle.States {
			if st != lifecycle.Queued && b.Counts[string(st)] > 0 {
				required[ledgerkeys.StateIndex(b.ID, string(st))] = true
			}
		}
		optional := map[string]bool{
			ledgerkeys.Events(b.ID): true, ledgerkeys.Watch(b.ID): true, ledgerkeys.DueOf(b.ID): true,
		}
		payouts := 0
		for _, k := range ks {
			switch {
			case strings.HasPrefix(k, ledgerkeys.Payout(b.ID, "")):
				payouts++
			case required[k]:
				delete(required, k)
			case optional[k]:
			default:
				t.Errorf("batch %s: unexpected key %s", b.ID, k)
			}
		}
		if payouts != b.Rows {
			t.Errorf("batch %s: %d payout hashes, want %d", b.ID, payouts, b.Rows)
		}
		for k := range required {
			t.Errorf("batch %s: key %s missing", b.ID, k)
		}
	}
	if len(groups["asynq"]) == 0 {
		t.Errorf("no asynq:{payouts}: key found")
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	slotsOfBatches := map[int64]bool{}
	for _, g := range names {
		ks := groups[g]
		sort.Strings(ks)
		sample := ks
		if len(sample) > 25 { // first, last and a spread between
			sample = nil
			for i := 0; i < 25; i++ {
				sample = append(sample, ks[i*(len(ks)-1)/24])
			}
		}
		slots := map[int64][]string{}
		for _, k := range sample {
			s, err := rdb.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
			}
			slots[s] = append(slots[s], k)
		}
		if len(slots) != 1 {
			t.Errorf("%s: keys in %d slots: %v", g, len(slots), slots)
			continue
		}
		for s := range slots {
			t.Logf("%s: %d keys, sample of %d all in slot %d", g, len(ks), len(sample), s)
			if strings.HasPrefix(g, "batch ") {
				slotsOfBatches[s] = true
			}
		}
	}
	if len(batches) > 1 && len(slotsOfBatches) < 2 {
		t.Logf("note: every batch landed in the same slot (random ids); spread not shown by batches")
	}
}

var digitRun = regexp.MustCompile(`[0-9]{12,19}`)

// checkNoCardInLogs asserts that no full card number of the files appears in
// the output of the processes.
func checkNoCardInLogs(t *testing.T, rows map[string]Row, procs []*proc.Proc) {
	t.Helper()
	cards := map[string]bool{}
	for _, r := range rows {
		if r.Card != "" {
			cards[r.Card] = true
		}
	}
	for _, p := range procs {
		for _, m := range digitRun.FindAllString(p.Tail(1<<30), -1) {
			if cards[m] {
				t.Errorf("%s: full card number %s...%s in its log", p.Name(), m[:6], m[len(m)-4:])
				break
			}
		}
	}
}
