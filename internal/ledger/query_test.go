package ledger

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/redis/go-redis/v9"
)

// registerGappy registers n payouts on lines with gaps (every third line
// missing, as refused rows leave them), amounts 1..n in a shuffled order,
// out of line order.
func registerGappy(t *testing.T, l *Ledger, batch string, n int) []string {
	t.Helper()
	ctx := context.Background()
	if _, _, err := l.BeginBatch(ctx, Batch{ID: batch, File: batch + ".csv", LoadedAt: time.Now(), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []NewPayout
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
		ps = append(ps, NewPayout{Line: line, ExternalID: ext, Amount: amount, Destination: "telecom MTS"})
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
	l, _ := newTestLedger(t)
	want := registerGappy(t, l, "b", 700)
	for _, size := range []int{1, 7, 100, 128, 129, 1000} {
		var got []string
		for off := 0; off < len(want)+size; off += size {
			ps, total, err := l.PageByLine(ctx, "b", off, size)
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
	// A batch indexed before the chunks is paged by a scan.
	l.rdb.ZAdd(ctx, linesKey("b"), redis.Z{Score: 2, Member: "Q0000"}) // its line, as the old index held it
	ps, total, err := l.PageByLine(ctx, "b", 1, 2)
	if err != nil || total != 700 || len(ps) != 2 || ps[0].ExternalID != "Q0001" {
		t.Fatalf("old index page: %d %v %v", total, ps, err)
	}
}

// TestBriefsAndSort: the brief scan gives every payout with its state and
// amount; SortBriefs orders by amount, then line.
func TestBriefsAndSort(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	want := registerGappy(t, l, "b", 300)
	if _, err := l.Cancel(ctx, "b", "Q0005", "alice", "duplicate"); err != nil {
		t.Fatal(err)
	}
	bs, err := l.Briefs(ctx, "b")
	if err != nil || len(bs) != len(want) {
		t.Fatalf("%d briefs, %v", len(bs), err)
	}
	for i, b := range bs {
		if b.ExternalID != want[i] || b.Units < 100 || b.Line < 2 {
			t.Fatalf("brief %d: %+v", i, b)
		}
		if st := map[bool]State{true: Cancelled, false: Queued}[b.ExternalID == "Q0005"]; b.State != st {
			t.Fatalf("%s is %s, want %s", b.ExternalID, b.State, st)
		}
	}
	SortBriefs(bs, true)
	if !slices.IsSortedFunc(bs, func(a, b PayoutBrief) int { return int(b.Units - a.Units) }) || bs[0].Units != 30000 {
		t.Fatalf("not largest first: %+v", bs[:3])
	}
	SortBriefs(bs, false)
	if bs[0].Units != 100 {
		t.Fatalf("not smallest first: %+v", bs[:3])
	}
}

// TestFindPayout finds an externalId in every batch that holds it, and
// nothing for one no batch holds.
func TestFindPayout(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b1", 3)
	seed(t, l, "b2", 5)
	ps, err := l.FindPayout(ctx, "E4")
	if err != nil || len(ps) != 1 || ps[0].Batch != "b2" || ps[0].Line != 5 {
		t.Fatalf("E4: %+v %v", ps, err)
	}
	ps, err = l.FindPayout(ctx, "E2")
	if err != nil || len(ps) != 2 {
		t.Fatalf("E2 in both: %+v %v", ps, err)
	}
	if ps, err = l.FindPayout(ctx, "nope"); err != nil || len(ps) != 0 {
		t.Fatalf("nope: %+v %v", ps, err)
	}
}
