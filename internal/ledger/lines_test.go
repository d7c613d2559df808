package ledger

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/redis/go-redis/v9"
)

// TestLineIndexChunks: payouts registered out of order, in two calls,
// across several chunks, come back in file order; each chunk stays small;
// DropBatch removes every chunk; a batch indexed the old way is still read.
func TestLineIndexChunks(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	var ps []NewPayout
	for i := 300; i >= 1; i-- {
		ps = append(ps, NewPayout{Line: i * 2, ExternalID: fmt.Sprintf("L%03d", i), Amount: money.MustParse("1.00"), Destination: "telecom MTS"})
	}
	if _, err := l.Register(ctx, "b", ps[:100], 2); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b", ps[100:], 2); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := l.each(ctx, "b", func(p Payout) error { got = append(got, p.ExternalID); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 || !slices.IsSorted(got) {
		t.Fatalf("Each gave %d payouts, sorted %v", len(got), slices.IsSorted(got))
	}
	chunks, err := l.lineChunks(ctx, "b")
	if err != nil || len(chunks) != 5 {
		t.Fatalf("chunks %v, %v", chunks, err)
	}
	for _, c := range chunks {
		if n := l.rdb.ZCard(ctx, lineChunkKey("b", c)).Val(); n > lineChunk {
			t.Fatalf("chunk %d holds %d", c, n)
		}
	}
	if err := l.Archive().DropBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if l.rdb.Exists(ctx, lineChunkKey("b", c)).Val() != 0 {
			t.Fatalf("chunk %d left", c)
		}
	}

	// The index before the chunks.
	seed(t, l, "old", 3)
	for _, c := range []int64{0} {
		l.rdb.Del(ctx, lineChunkKey("old", c))
	}
	l.rdb.Del(ctx, lineChunksKey("old"))
	l.rdb.ZAdd(ctx, linesKey("old"), redis.Z{Score: 4, Member: "E3"}, redis.Z{Score: 2, Member: "E1"}, redis.Z{Score: 3, Member: "E2"})
	got = nil
	if err := l.each(ctx, "old", func(p Payout) error { got = append(got, p.ExternalID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"E1", "E2", "E3"}) {
		t.Fatalf("old index: %v", got)
	}
}

// lineIndexCase is a batch whose line index is split between the index
// before the chunks (old) and the chunked one (new): the lines each holds.
type lineIndexCase struct {
	name     string
	old, new []int
}

// lineIndexCases: the index the two make must hold their union.
var lineIndexCases = []lineIndexCase{
	{name: "old only", old: []int{4, 2, 3}},
	{name: "new only", new: []int{2, 3, 4, 300}},
	{name: "both overlapping", old: []int{2, 3, 4, 5}, new: []int{4, 5, 6, 7}},
	{name: "both disjoint", old: []int{2, 5, 200, 201}, new: []int{3, 4, 130, 1000}},
	{name: "both overlapping, many pages", old: lineSpan(2, 2600), new: lineSpan(1500, 4000)},
	{name: "both disjoint, many pages", old: lineSpan(2, 1700), new: lineSpan(1701, 3500)},
	{name: "neither"},
}

// lineSpan returns the lines from..to.
func lineSpan(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// lineID is the externalId written at line in both indexes.
func lineID(line int) string { return fmt.Sprintf("E%05d", line) }

// writeLineIndexes writes c's two indexes of batch the way the loaders of
// the old and of the new version did.
func writeLineIndexes(t *testing.T, l *Ledger, batch string, c lineIndexCase) {
	t.Helper()
	ctx := context.Background()
	pipe := l.rdb.Pipeline()
	for _, line := range c.old {
		pipe.ZAdd(ctx, linesKey(batch), redis.Z{Score: float64(line), Member: lineID(line)})
	}
	for _, line := range c.new {
		k := int64(line) / lineChunk
		pipe.ZAdd(ctx, lineChunkKey(batch, k), redis.Z{Score: float64(line), Member: lineID(line)})
		pipe.ZAdd(ctx, lineChunksKey(batch), redis.Z{Score: float64(k), Member: k})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkLineIndexMadeOne runs lineIndexCases against the ledger newLedger
// returns (miniredis here, a redis-server in the integration test): the
// first eachIDs moves the old index into the chunks and gives the union
// of both in file line order, each externalId once, at most eachChunk per
// call; afterwards the old index is gone and each chunk holds only its
// lines.
func checkLineIndexMadeOne(t *testing.T, newLedger func(t *testing.T) *Ledger) {
	for _, c := range lineIndexCases {
		t.Run(c.name, func(t *testing.T) {
			l := newLedger(t)
			ctx := context.Background()
			writeLineIndexes(t, l, "b", c)
			lines := slices.Concat(c.old, c.new)
			slices.Sort(lines)
			lines = slices.Compact(lines)
			want := make([]string, 0, len(lines))
			for _, line := range lines {
				want = append(want, lineID(line))
			}
			got := []string{}
			err := l.eachIDs(ctx, "b", func(ids []string) error {
				if len(ids) == 0 || len(ids) > eachChunk {
					t.Errorf("a call with %d ids, want 1..%d", len(ids), eachChunk)
				}
				got = append(got, ids...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("eachIDs gave %d ids, want %d in line order; first difference at %d: got %v, want %v",
					len(got), len(want), i, got[i:min(i+3, len(got))], want[i:min(i+3, len(want))])
			}
			if n := l.rdb.Exists(ctx, linesKey("b")).Val(); n != 0 {
				t.Fatalf("the old line index is still there")
			}
			checkChunks(t, l, "b", len(want))
		})
	}
}

// checkChunks fails unless batch's chunks hold n entries in all, each
// within its chunk's lines.
func checkChunks(t *testing.T, l *Ledger, batch string, n int) {
	t.Helper()
	ctx := context.Background()
	chunks, err := l.lineChunks(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, c := range chunks {
		zs := l.rdb.ZRangeWithScores(ctx, lineChunkKey(batch, c), 0, -1).Val()
		for _, z := range zs {
			if int64(z.Score)/lineChunk != c {
				t.Fatalf("line %v in chunk %d", z.Score, c)
			}
		}
		held += len(zs)
	}
	if held != n {
		t.Fatalf("the chunks hold %d entries, want %d", held, n)
	}
}

// TestLineIndexMadeOne: a batch with the index before the chunks, and
// chunks too (a loader of the new version registered more rows of it),
// loses no line when its old index is moved into the chunks.
func TestLineIndexMadeOne(t *testing.T) {
	checkLineIndexMadeOne(t, func(t *testing.T) *Ledger { l, _ := newTestLedger(t); return l })
}

// stateIndexKept reports whether batch's index per state (read by package
// view) holds, for every state but queued, as many payouts as its counts.
func stateIndexKept(ctx context.Context, l *Ledger, batch string) (bool, error) {
	c, err := l.counts(ctx, batch)
	if err != nil {
		return false, err
	}
	for _, st := range lifecycle.States {
		if st == lifecycle.Queued {
			continue
		}
		n, err := l.rdb.ZCard(ctx, stateIndexKey(batch, st)).Result()
		if err != nil || n != c.Rows[st] {
			return false, err
		}
	}
	return true, nil
}
