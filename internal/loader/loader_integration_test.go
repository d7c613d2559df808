//go:build integration

package loader

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/view"
)

// luhnCard returns a valid 16-digit card number for i.
func luhnCard(i int) string {
	base := fmt.Sprintf("411111%09d", i)
	for d := 0; d <= 9; d++ {
		if c := base + fmt.Sprint(d); card.Luhn(c) {
			return c
		}
	}
	panic("unreachable")
}

// TestLoad100kRows loads 100,000 rows into a real Redis: every task is
// enqueued and every ledger entry present; loading the file again adds
// nothing.
func TestLoad100kRows(t *testing.T) {
	const rows = 100_000
	f := newFixture(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "big.csv")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "externalId,amount,cardNumber,telecomOperator")
	for i := 0; i < rows; i++ {
		if i%3 == 0 {
			fmt.Fprintf(w, "BIG-%06d,%d.%02d,,MTS\n", i, 1+i%500, i%100)
		} else {
			fmt.Fprintf(w, "BIG-%06d,%d.%02d,%s,\n", i, 1+i%500, i%100, luhnCard(i))
		}
	}
	w.Flush()
	out.Close()

	start := time.Now()
	res, err := f.ld.LoadFile(ctx, path, Options{})
	if err != nil || !res.Loaded || res.Registered != rows || res.Enqueued != rows {
		t.Fatalf("load: registered %d enqueued %d errors %v err %v", res.Registered, res.Enqueued, res.Errors, err)
	}
	t.Logf("loaded %d rows in %s (%.0f rows/s)", rows, time.Since(start).Round(time.Millisecond), rows/time.Since(start).Seconds())
	if got := f.pending(); got != rows {
		t.Fatalf("pending tasks %d, want %d", got, rows)
	}
	c, err := view.New(f.led.Redis()).Counts(ctx, res.Batch)
	if err != nil || c.Rows[lifecycle.Queued] != rows {
		t.Fatalf("queued %d, want %d (%v)", c.Rows[lifecycle.Queued], rows, err)
	}
	seen, prev := 0, 0
	if err := view.New(f.led.Redis()).Each(ctx, res.Batch, func(p ledger.Payout) error {
		if p.Line <= prev || p.State != lifecycle.Queued || p.ExternalID == "" {
			return fmt.Errorf("bad entry after line %d: %+v", prev, p)
		}
		prev = p.Line
		seen++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != rows {
		t.Fatalf("ledger holds %d entries, want %d", seen, rows)
	}
	keys := f.keys()
	again, err := f.ld.LoadFile(ctx, path, Options{})
	if err != nil || again.DuplicateOf == nil || again.Registered != 0 || again.Enqueued != 0 {
		t.Fatalf("reload: %+v %v", again, err)
	}
	if f.keys() != keys || f.pending() != rows {
		t.Fatalf("reload changed Redis: keys %d -> %d, pending %d", keys, f.keys(), f.pending())
	}
}
