package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestLoadResumeUnderOtherOptionsExitsUsage: payout load of a file whose
// interrupted load was begun under other reading options is refused with
// exit 2 (a usage error, not an infrastructure fault), naming the option,
// and loads nothing.
func TestLoadResumeUnderOtherOptionsExitsUsage(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "p.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,telecomOperator\nR-1,1.500,MTS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := loader.BatchID(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The first run (killed) read the file as comma-dot.
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: batch, File: "p.csv", LoadedAt: time.Now(), Total: money.Zero, Scale: 2,
		Reading: "amount format=comma-dot\n"}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMain(t, nil, "load", "--redis", "redis://"+mr.Addr(), "--insecure-plaintext", "--allow-volatile-redis", "--log-level", "error", file)
	want := "resume with the same options as the first run: amount format comma-dot (this run: plain)"
	if code != ExitUsage || !strings.Contains(out+errs, want) {
		t.Fatalf("exit %d, want %d and %q in\n%s%s", code, ExitUsage, want, out, errs)
	}
	if _, err := l.Get(ctx, batch, "R-1"); err == nil {
		t.Error("R-1 was registered by the refused rerun")
	}
}
