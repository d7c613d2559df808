package loader

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
)

func TestApprovalControls(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		approval Approval
		held     string // substring of the reason; "" = goes at once
	}{
		{"none", Approval{}, ""},
		{"required", Approval{Required: true, By: "alice"}, "approval required"},
		{"required, below the auto-approval amount", Approval{Required: true, AutoBelow: money.MustParse("100")}, ""},
		{"required, not below it", Approval{Required: true, AutoBelow: money.MustParse("30.51")}, "approval required"},
		{"above the batch limit, auto-approval or not", Approval{Required: true, AutoBelow: money.MustParse("100"), MaxBatchTotal: money.MustParse("30")}, "above the batch limit 30"},
		{"over the daily limit", Approval{DailyLimit: money.MustParse("30")}, "over the daily limit 30"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			res, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", goodCSV), Options{Approval: tt.approval})
			if err != nil || !res.Loaded || res.Registered != 3 {
				t.Fatalf("load: %+v %v", res, err)
			}
			b, _ := f.led.Batch(ctx, res.Batch)
			if tt.held == "" {
				if res.Held != "" || res.Enqueued != 3 || f.pending() != 3 || b.Phase != lifecycle.PhaseLoaded {
					t.Fatalf("held %q, enqueued %d, pending %d, phase %s", res.Held, res.Enqueued, f.pending(), b.Phase)
				}
				return
			}
			if !strings.Contains(res.Held, tt.held) || res.Enqueued != 0 || f.pending() != 0 || b.Phase != lifecycle.PhaseAwaiting || b.WaitReason != res.Held {
				t.Fatalf("held %q (want %q), enqueued %d, pending %d, phase %s", res.Held, tt.held, res.Enqueued, f.pending(), b.Phase)
			}
			if b.LoadedBy != tt.approval.By {
				t.Fatalf("loaded by %q", b.LoadedBy)
			}
			// A copy of the file awaiting approval is a duplicate, not a resume.
			again, err := f.ld.LoadFile(ctx, writeFile(t, t.TempDir(), "a.csv", goodCSV), Options{})
			if err != nil || again.DuplicateOf == nil || f.pending() != 0 {
				t.Fatalf("reload of a held batch: %+v %v", again, err)
			}
			if _, err := f.led.Controls().Approve(ctx, res.Batch, ledger.Approval{By: "bob", FourEyes: true}); err != nil {
				t.Fatal(err)
			}
			if n, err := f.ld.EnqueueApproved(ctx, res.Batch); err != nil || n != 3 || f.pending() != 3 {
				t.Fatalf("after approval: %d enqueued (%v), %d pending", n, err, f.pending())
			}
		})
	}
}

// TestDailyLimitUnderConcurrentLoaders: eight loaders of eight different
// files of 30.51 each against a daily limit of 100: exactly three go.
func TestDailyLimitUnderConcurrentLoaders(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	var mu sync.Mutex
	went, held := 0, 0
	for i := 0; i < 8; i++ {
		content := strings.ReplaceAll(goodCSV, "A-", fmt.Sprintf("D%d-", i))
		path := writeFile(t, dir, fmt.Sprintf("d%d.csv", i), content)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.ld.LoadFile(ctx, path, Options{Approval: Approval{DailyLimit: money.MustParse("100")}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case res.Held == "":
				went++
			default:
				held++
			}
		}()
	}
	wg.Wait()
	if went != 3 || held != 5 {
		t.Fatalf("went %d, held %d; want 3 and 5", went, held)
	}
}
