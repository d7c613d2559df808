package ledger

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
	if err := l.Each(ctx, "b", func(p Payout) error { got = append(got, p.ExternalID); return nil }); err != nil {
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
		if n := l.rdb.ZCard(ctx, l.lineChunkKey("b", c)).Val(); n > lineChunk {
			t.Fatalf("chunk %d holds %d", c, n)
		}
	}
	if err := l.DropBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if l.rdb.Exists(ctx, l.lineChunkKey("b", c)).Val() != 0 {
			t.Fatalf("chunk %d left", c)
		}
	}

	// The index before the chunks.
	seed(t, l, "old", 3)
	for _, c := range []int64{0} {
		l.rdb.Del(ctx, l.lineChunkKey("old", c))
	}
	l.rdb.Del(ctx, l.lineChunksKey("old"))
	l.rdb.ZAdd(ctx, l.linesKey("old"), redis.Z{Score: 4, Member: "E3"}, redis.Z{Score: 2, Member: "E1"}, redis.Z{Score: 3, Member: "E2"})
	got = nil
	if err := l.Each(ctx, "old", func(p Payout) error { got = append(got, p.ExternalID); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"E1", "E2", "E3"}) {
		t.Fatalf("old index: %v", got)
	}
}
