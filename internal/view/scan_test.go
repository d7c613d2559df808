package view

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// newTestReader is a Reader without its scan cache, and the ledger it
// reads, on a fresh miniredis.
func newTestReader(t *testing.T) (*Reader, *ledger.Ledger) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return uncached(rdb), ledger.New(rdb)
}

// seed registers n payouts E1..En of 10.25 on lines 2..n+1 of a loaded
// batch.
func seed(t *testing.T, l *ledger.Ledger, batch string, n int) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: batch, File: "f.csv", LoadedAt: time.Now(), Rows: int64(n), Total: money.MustParse("1"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := 1; i <= n; i++ {
		ps = append(ps, ledger.NewPayout{Line: i + 1, ExternalID: fmt.Sprintf("E%d", i), Amount: money.MustParse("10.25"), Destination: "card 411111******1111"})
	}
	if added, err := l.Register(ctx, batch, ps, 2); err != nil || added != n {
		t.Fatalf("Register = %d, %v", added, err)
	}
	if err := l.FinishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
}

// registerGappy registers n payouts on lines with gaps (every third line
// missing, as refused rows leave them), amounts 1..n in a shuffled order,
// out of line order.
func registerGappy(t *testing.T, l *ledger.Ledger, batch string, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: batch, File: batch + ".csv", LoadedAt: time.Now(), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	var want []string
	line := 1
	for i := range n {
		line++
		if line%3 == 0 {
			line++
		}
		ext := fmt.Sprintf("Q%04d", i)
		want = append(want, ext)
		amount := money.FromMinor(int64((i*7919)%n+1)*100, 2)
		ps = append(ps, ledger.NewPayout{Line: line, ExternalID: ext, Amount: amount, Destination: "telecom MTS"})
	}
	slices.Reverse(ps)
	for len(ps) > 0 {
		k := min(97, len(ps))
		if _, err := l.Register(ctx, batch, ps[:k], 2); err != nil {
			t.Fatal(err)
		}
		ps = ps[k:]
	}
	return want
}

// TestPageByLine: every page of every size gives the payouts Each gives at
// those positions, and the total; past the end a page is empty.
func TestPageByLine(t *testing.T) {
	ctx := context.Background()
	r, l := newTestReader(t)
	want := registerGappy(t, l, "b", 700)
	for _, size := range []int{1, 7, 100, 128, 129, 1000} {
		var got []string
		for off := 0; off < len(want)+size; off += size {
			ps, total, err := r.pageByLine(ctx, "b", off, size)
			if err != nil || total != len(want) {
				t.Fatalf("size %d offset %d: total %d, %v", size, off, total, err)
			}
			if len(ps) > size {
				t.Fatalf("size %d offset %d: %d payouts", size, off, len(ps))
			}
			for _, p := range ps {
				got = append(got, p.ExternalID)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("size %d: pages give %d payouts, not the file's order", size, len(got))
		}
	}
	// An entry of the index before the chunks is moved into them first.
	r.rdb.ZAdd(ctx, keys.Lines("b"), redis.Z{Score: 2, Member: "Q0000"}) // its line, as the old index held it
	ps, total, err := r.pageByLine(ctx, "b", 1, 2)
	if err != nil || total != 700 || len(ps) != 2 || ps[0].ExternalID != "Q0001" {
		t.Fatalf("old index page: %d %v %v", total, ps, err)
	}
	if r.rdb.Exists(ctx, keys.Lines("b")).Val() != 0 {
		t.Fatal("the old index is still there after a page")
	}
}

// registerSparse registers n payouts one per line chunk (line 128i+2),
// every seventh sent to needs_review: a batch of many chunks, so that a
// scan takes several scripts and round trips.
func registerSparse(t *testing.T, l *ledger.Ledger, batch string, n int) (all, review []string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: batch, File: batch + ".csv", LoadedAt: time.Now(), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i := range n {
		ext := fmt.Sprintf("S%04d", i)
		all = append(all, ext)
		ps = append(ps, ledger.NewPayout{Line: i*keys.LineChunk + 2, ExternalID: ext, Amount: money.FromMinor(int64(i+1), 2), Destination: "telecom MTS"})
	}
	if _, err := l.Register(ctx, batch, ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 7 {
		if _, err := l.BeginCreate(ctx, batch, all[i], 1); err != nil {
			t.Fatal(err)
		}
		if _, err := l.FinishCreate(ctx, batch, all[i], 1, decide.CreateResult{To: lifecycle.NeedsReview, Error: "no answer", HTTPStatus: 500}); err != nil {
			t.Fatal(err)
		}
		review = append(review, all[i])
	}
	return all, review
}

// TestBriefsAcrossRoundTrips: a scan of more chunks than one round trip
// reads gives every payout once, in line order, with its line, state and
// amount; BriefsIn gives those in one state, the first limit of them.
func TestBriefsAcrossRoundTrips(t *testing.T) {
	ctx := context.Background()
	r, l := newTestReader(t)
	n := 2*scanGroup*scanWave + 5
	all, review := registerSparse(t, l, "b", n)
	bs, err := r.briefs(ctx, "b")
	if err != nil || len(bs) != n {
		t.Fatalf("%d briefs of %d, %v", len(bs), n, err)
	}
	for i, b := range bs {
		st := map[bool]lifecycle.State{true: lifecycle.NeedsReview, false: lifecycle.Queued}[i%7 == 0]
		if b.ExternalID != all[i] || b.Line != i*keys.LineChunk+2 || b.Units != int64(i+1) || b.State != st {
			t.Fatalf("brief %d: %+v", i, b)
		}
	}
	cases := []struct {
		st    lifecycle.State
		limit int
		want  []string
	}{
		{lifecycle.NeedsReview, 0, review},
		{lifecycle.NeedsReview, 3, review[:3]},
		{lifecycle.NeedsReview, len(review) + 1, review},
		{lifecycle.Paid, 0, nil},
		{"", 5, all[:5]},
	}
	for _, c := range cases {
		got, err := r.briefsIn(ctx, "b", c.st, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, b := range got {
			ids = append(ids, b.ExternalID)
		}
		if !slices.Equal(ids, append([]string{}, c.want...)) {
			t.Fatalf("BriefsIn(%q, %d) = %d payouts %v, want %d", c.st, c.limit, len(ids), ids[:min(3, len(ids))], len(c.want))
		}
	}
}

// TestBriefsOfAnEmptyBatch: a batch without payouts, or none at all,
// scans to nothing.
func TestBriefsOfAnEmptyBatch(t *testing.T) {
	r, _ := newTestReader(t)
	if bs, err := r.briefs(context.Background(), "none"); err != nil || len(bs) != 0 {
		t.Fatalf("%v %v", bs, err)
	}
}

// TestBriefsAndSort: the brief scan gives every payout with its state and
// amount; SortBriefs orders by amount, then line.
func TestBriefsAndSort(t *testing.T) {
	ctx := context.Background()
	r, l := newTestReader(t)
	want := registerGappy(t, l, "b", 300)
	if _, err := l.Cancel(ctx, "b", "Q0005", "alice", "duplicate"); err != nil {
		t.Fatal(err)
	}
	bs, err := r.briefs(ctx, "b")
	if err != nil || len(bs) != len(want) {
		t.Fatalf("%d briefs, %v", len(bs), err)
	}
	for i, b := range bs {
		if b.ExternalID != want[i] || b.Units < 100 || b.Line < 2 {
			t.Fatalf("brief %d: %+v", i, b)
		}
		if st := map[bool]lifecycle.State{true: lifecycle.Cancelled, false: lifecycle.Queued}[b.ExternalID == "Q0005"]; b.State != st {
			t.Fatalf("%s is %s, want %s", b.ExternalID, b.State, st)
		}
	}
	sortBriefs(bs, true)
	if !slices.IsSortedFunc(bs, func(a, b brief) int { return int(b.Units - a.Units) }) || bs[0].Units != 30000 {
		t.Fatalf("not largest first: %+v", bs[:3])
	}
	sortBriefs(bs, false)
	if bs[0].Units != 100 {
		t.Fatalf("not smallest first: %+v", bs[:3])
	}
}

// TestFindPayout finds an externalId in every batch that holds it, and
// nothing for one no batch holds.
func TestFindPayout(t *testing.T) {
	ctx := context.Background()
	r, l := newTestReader(t)
	seed(t, l, "b1", 3)
	seed(t, l, "b2", 5)
	ps, err := r.findPayout(ctx, "E4")
	if err != nil || len(ps) != 1 || ps[0].Batch != "b2" || ps[0].Line != 5 {
		t.Fatalf("E4: %+v %v", ps, err)
	}
	ps, err = r.findPayout(ctx, "E2")
	if err != nil || len(ps) != 2 {
		t.Fatalf("E2 in both: %+v %v", ps, err)
	}
	if ps, err = r.findPayout(ctx, "nope"); err != nil || len(ps) != 0 {
		t.Fatalf("nope: %+v %v", ps, err)
	}
}

// writeStateIndex writes batch's index per state from a scan, as the
// transition scripts' move() keeps it: every payout not queued in the
// zset of its state, scored by line.
func writeStateIndex(t *testing.T, r *Reader, batch string) {
	t.Helper()
	ctx := context.Background()
	bs, err := r.briefs(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.State != lifecycle.Queued {
			r.rdb.ZAdd(ctx, keys.StateIndex(batch, string(b.State)), redis.Z{Score: float64(b.Line), Member: b.ExternalID})
		}
	}
}

// TestStateIndex: a page in one state comes from the index per state when
// the index is complete (what the scan gives, at the cost of the page),
// and is refused (ok false: the caller scans) when a payout moved without
// the index following it.
func TestStateIndex(t *testing.T) {
	ctx := context.Background()
	r, l := newTestReader(t)
	ids := func(ps []ledger.Payout) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.ExternalID)
		}
		return out
	}
	// Nothing moved yet: every payout is queued, the empty index complete.
	registerGappy(t, l, "fresh", 300)
	ps, total, ok, err := r.pageInState(ctx, "fresh", lifecycle.Queued, 100, 50)
	want, _, _ := r.pageByLine(ctx, "fresh", 100, 50)
	if err != nil || !ok || total != 300 || !slices.Equal(ids(ps), ids(want)) {
		t.Fatalf("fresh, queued: %d %v %v, %v", total, ok, err, ids(ps))
	}
	if ps, total, ok, err := r.pageInState(ctx, "fresh", lifecycle.NeedsReview, 0, 50); err != nil || !ok || total != 0 || len(ps) != 0 {
		t.Fatalf("fresh, needs review: %d %v %v %v", total, ok, err, ps)
	}

	_, review := registerSparse(t, l, "b", 200)
	// The transitions kept the index: what the scan gives, at once.
	if ps, total, ok, err := r.pageInState(ctx, "b", lifecycle.NeedsReview, 0, 1000); err != nil || !ok || total != len(review) || !slices.Equal(ids(ps), review) {
		t.Fatalf("index kept by the transitions: %d %v %v, %v", total, ok, err, ids(ps))
	}
	// A batch whose payouts moved before the index was kept (its zset
	// short of the count) is scanned instead.
	if err := r.rdb.Del(ctx, keys.StateIndex("b", string(lifecycle.NeedsReview))).Err(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := r.pageInState(ctx, "b", lifecycle.NeedsReview, 0, 10); err != nil || ok {
		t.Fatalf("payouts moved without the index: ok %v, %v", ok, err)
	}
	if _, ok, err := r.briefsInIndex(ctx, "b", lifecycle.NeedsReview); err != nil || ok {
		t.Fatalf("briefs without the index: ok %v, %v", ok, err)
	}
	writeStateIndex(t, r, "b")
	for _, c := range []struct{ offset, limit int }{{0, 10}, {5, 10}, {25, 100}, {len(review), 10}, {0, 0}} {
		ps, total, ok, err := r.pageInState(ctx, "b", lifecycle.NeedsReview, c.offset, c.limit)
		lo := min(c.offset, len(review))
		if err != nil || !ok || total != len(review) || !slices.Equal(ids(ps), review[lo:min(lo+c.limit, len(review))]) {
			t.Fatalf("needs review %d+%d: %d %v %v, %v", c.offset, c.limit, total, ok, err, ids(ps))
		}
	}
	if _, _, ok, err := r.pageInState(ctx, "b", lifecycle.Queued, 0, 10); err != nil || ok {
		t.Fatalf("queued once payouts left it: ok %v, %v", ok, err)
	}
	bs, ok, err := r.briefsInIndex(ctx, "b", lifecycle.NeedsReview)
	scan, _ := r.briefsIn(ctx, "b", lifecycle.NeedsReview, 0)
	if err != nil || !ok || !slices.Equal(bs, scan) {
		t.Fatalf("briefs from the index: %v %v, %d of %d", ok, err, len(bs), len(scan))
	}
}
