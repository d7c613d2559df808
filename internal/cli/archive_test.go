package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/worker"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestArchivedBatchStatusReport archives a final batch through payout
// archive, then asks status and report about it, and tries to change it.
func TestArchivedBatchStatusReport(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	now := time.Now().UTC()
	mr.SetTime(now)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	url := "redis://" + mr.Addr()
	l := ledger.New(rdb)
	if _, _, err := l.BeginBatch(ctx, ledger.Batch{ID: "b", File: "f.csv", LoadedAt: now, Rows: 3, Total: money.MustParse("30.00"), Scale: 2}); err != nil {
		t.Fatal(err)
	}
	var ps []ledger.NewPayout
	for i, ext := range []string{"P1", "P2", "P3"} {
		ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: ext, Amount: money.MustParse("10.00"), Destination: "card 411111******1111", Sealed: "x"})
	}
	if _, err := l.Claims().Claim(ctx, "b", []string{"P1", "P2", "P3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Register(ctx, "b", ps, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"P1", "P2", "P3"} {
		l.BeginCreate(ctx, "b", ext, 1)
		to := decide.CreateResult{To: lifecycle.Created, OrderID: "o-" + ext}
		if ext == "P3" {
			to = decide.CreateResult{To: lifecycle.NeedsReview, Error: "no answer"}
		}
		if _, err := l.FinishCreate(ctx, "b", ext, 1, to); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "arch")

	code, out, errs := runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir)
	if code != ExitOK || out != "" {
		t.Fatalf("recent batch: %d %q %s", code, out, errs)
	}
	// Old enough, but P3 waits for a person: archived, it could never be
	// resolved.
	mr.SetTime(now.Add(31 * 24 * time.Hour))
	if code, out, errs = runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir, "--dry-run"); code != ExitOK || out != "" {
		t.Fatalf("batch with a payout in needs_review: %d %q %s", code, out, errs)
	}
	if code, _, errs = runMain(t, fakePSP(t, nil), "resolve", "--redis", url, "--by", "alice", "--note", "checked", "--as", "rejected", "b", "P3"); code != ExitOK {
		t.Fatalf("resolve before the archive: %d %s", code, errs)
	}
	_, before, _ := runMain(t, nil, "report", "--redis", url, "b")
	mr.SetTime(now.Add(62 * 24 * time.Hour))
	// The payouts' events are still in the outbox (no worker pumped
	// them): the archive waits, or they would be dropped with it.
	code, out, errs = runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir, "--dry-run")
	if code != ExitOK || !strings.Contains(out, "would be left in Redis: its outbox holds 7 payout events") {
		t.Fatalf("dry run with events in the outbox: %d %q %s", code, out, errs)
	}
	if _, err := worker.PumpEvents(ctx, l, nil); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir, "--dry-run")
	if code != ExitOK || !strings.Contains(out, "would be archived") {
		t.Fatalf("dry run: %d %q %s", code, out, errs)
	}
	code, out, errs = runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir, "--older-than", "30d", "--id-window", "10d")
	if code != ExitOK || !strings.Contains(out, "3 payouts archived to "+dir) {
		t.Fatalf("archive: %d %q %s", code, out, errs)
	}
	if mr.Exists(keys.OwnerOf("P1")) {
		t.Fatal("the live claim of P1 was kept")
	}
	if own, err := ledger.New(redis.NewClient(&redis.Options{Addr: mr.Addr()})).Claims().Owners(context.Background(), "new", []string{"P1"}); err != nil || own["P1"] != "b" {
		t.Fatalf("archived claim of P1: %v %v", own, err)
	}

	code, out, _ = runMain(t, nil, "status", "--redis", url)
	if code != ExitOK || !strings.Contains(out, "f.csv (archived)") {
		t.Fatalf("status: %d\n%s", code, out)
	}
	code, out, _ = runMain(t, nil, "status", "--redis", url, "b")
	if code != ExitOK || !strings.Contains(out, "archived  ") || !strings.Contains(out, "rejected") {
		t.Fatalf("status b: %d\n%s", code, out)
	}
	code, out, _ = runMain(t, nil, "status", "--redis", url, "--json", "b")
	var v struct {
		Archive string
		Counts  map[string]int64
	}
	if err := json.Unmarshal([]byte(out), &v); code != ExitOK || err != nil || v.Archive == "" || v.Counts["created"] != 2 {
		t.Fatalf("status --json b: %d %v\n%s", code, err, out)
	}

	// The report is the one written before the archive, to the byte.
	code, out, errs = runMain(t, nil, "report", "--redis", url, "b")
	if code != ExitRejected || out != before || !strings.Contains(errs, "archived") {
		t.Fatalf("report: %d %s\n%s\nwant\n%s", code, errs, out, before)
	}
	outFile := filepath.Join(t.TempDir(), "r.json")
	code, out, _ = runMain(t, nil, "report", "--redis", url, "--format", "json", "--out", outFile, "b")
	if b, err := os.ReadFile(outFile); code != ExitRejected || err != nil || !strings.Contains(string(b), "o-P1") || !strings.Contains(out, "reconciled") {
		t.Fatalf("report --out: %d %v\n%s", code, err, out)
	}
	if code, _, errs = runMain(t, nil, "report", "--redis", url, "--failed-only", "--insecure-plaintext", "b"); code != ExitUsage || !strings.Contains(errs, "archived") {
		t.Fatalf("report --failed-only: %d %s", code, errs)
	}

	// Nothing of it can change any more.
	code, _, errs = runMain(t, fakePSP(t, nil), "resolve", "--redis", url, "--by", "alice", "--note", "checked", "--as", "rejected", "b", "P3")
	if code != ExitUsage || !strings.Contains(errs, "was archived") || !strings.Contains(errs, "can no longer be resolved") {
		t.Fatalf("resolve: %d %s", code, errs)
	}
	code, _, errs = runMain(t, nil, "cancel", "--redis", url, "--by", "alice", "--note", "late", "b", "P1")
	if code != ExitUsage || !strings.Contains(errs, "was archived") {
		t.Fatalf("cancel: %d %s", code, errs)
	}

	// After the id window (10 days, to the end of that day) the next
	// archive run drops the claims, once, and says so; the ids are free.
	mr.SetTime(now.Add((62 + 12) * 24 * time.Hour))
	for i, want := range []string{"3 externalId claims of archived batches expired (id window over) and were dropped\n", ""} {
		if code, out, errs = runMain(t, nil, "archive", "--redis", url, "--archive-dir", dir); code != ExitOK || out != want {
			t.Fatalf("archive run %d after the id window: %d %q, want %q; %s", i+1, code, out, want, errs)
		}
	}
	if own, err := l.Claims().Owners(ctx, "new", []string{"P1", "P2", "P3"}); err != nil || len(own) != 0 {
		t.Fatalf("claims after the id window: %v %v", own, err)
	}
}
