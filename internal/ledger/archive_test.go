package ledger

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger/keys"
	"github.com/acme/payout/internal/lifecycle"
)

func TestArchiveKeys(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLedger(t)
	seed(t, l, "b", 5)
	if _, err := l.Claims().Claim(ctx, "b", []string{"E1", "E2", "E3", "E4", "E5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claims().Claim(ctx, "other", []string{"X"}); err != nil {
		t.Fatal(err)
	}
	var fps []Fingerprint
	if err := l.eachIDs(ctx, "b", func(ids []string) error {
		hs, err := l.readPayouts(ctx, "b", ids)
		for i, m := range hs {
			fps = append(fps, FingerprintOf(ids[i], m))
		}
		return err
	}); err != nil || len(fps) != 5 {
		t.Fatal(len(fps), err)
	}

	// Claims: only the batch's, only once; bucketed, the live keys gone.
	n, err := l.Claims().ArchiveClaims(ctx, "b", []string{"E1", "E2", "E3", "E4", "E5", "X"}, clk.t.Add(time.Hour), clk.t)
	if err != nil || n != 5 {
		t.Fatalf("ArchiveClaims = %d, %v", n, err)
	}
	if n, _ := l.Claims().ArchiveClaims(ctx, "b", []string{"E1"}, clk.t.Add(2*time.Hour), clk.t); n != 0 {
		t.Fatal("a re-run moved a claim again")
	}
	if l.rdb.Exists(ctx, keys.OwnerOf("E1")).Val() != 0 || l.rdb.Exists(ctx, keys.OwnerOf("X")).Val() != 1 {
		t.Fatal("live claim keys: the batch's should be gone, another batch's kept")
	}
	if own, err := l.Claims().Owners(ctx, "new", []string{"E1", "X", "Z"}); err != nil || own["E1"] != "b" || own["X"] != "other" || len(own) != 2 {
		t.Fatalf("Owners = %v, %v", own, err)
	}

	// A changed payout stops the deletion of its chunk.
	clk.add(time.Second)
	l.rdb.HSet(ctx, payoutKey("b", "E4"), "updated", clk.t.UnixMilli())
	deleted, err := l.Archive().DeleteArchivedPayouts(ctx, "b", fps, 2, nil)
	var ce *ChangedError
	if !errors.As(err, &ce) || ce.ExternalID != "E4" || deleted != 2 {
		t.Fatalf("DeleteArchivedPayouts = %d, %v", deleted, err)
	}
	if l.rdb.Exists(ctx, payoutKey("b", "E3")).Val() != 1 {
		t.Fatal("the changed payout's chunk was partly deleted")
	}
	fps[3] = FingerprintOf("E4", l.rdb.HGetAll(ctx, payoutKey("b", "E4")).Val())
	if deleted, err = l.Archive().DeleteArchivedPayouts(ctx, "b", fps, 2, nil); err != nil || deleted != 3 {
		t.Fatalf("second DeleteArchivedPayouts = %d, %v", deleted, err)
	}

	if err := l.Archive().SaveArchived(ctx, ArchivedBatch{Batch: Batch{ID: "b", File: "f.csv", Phase: lifecycle.PhaseLoaded}, ArchivedAt: clk.t}); err != nil {
		t.Fatal(err)
	}
	if err := l.Archive().DropBatch(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	for _, k := range l.Archive().batchKeys("b") {
		if l.rdb.Exists(ctx, k).Val() != 0 {
			t.Fatalf("%s left", k)
		}
	}
	if _, err := l.Batch(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	err = l.Archive().CheckNotArchived(ctx, "b")
	if !errors.Is(err, ErrArchived) {
		t.Fatalf("CheckNotArchived = %v", err)
	}
	all, err := l.Archive().ArchivedBatches(ctx)
	if err != nil || len(all) != 1 || all[0].AsBatch().Phase != lifecycle.PhaseArchived {
		t.Fatalf("ArchivedBatches = %+v, %v", all, err)
	}
}
