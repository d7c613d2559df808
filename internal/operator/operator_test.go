package operator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/queue"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/ui"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
)

func newActions(t *testing.T, urls ...string) (*Actions, *redis.Client) {
	t.Helper()
	rdb := fakeredis.Working(t)
	var em *notify.Emitter
	if len(urls) > 0 {
		em = notify.NewEmitter(rdb, urls)
	}
	return New(rdb, em, zerolog.Nop()), rdb
}

func TestQueueChangedRecordsAndNotifies(t *testing.T) {
	tests := []struct {
		name   string
		urls   []string
		paused bool
		want   string
		queued int
	}{
		{"pause, two receivers", []string{"https://a.example/n", "https://b.example/n"}, true, "paused", 2},
		{"resume, no receiver", nil, false, "resumed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, rdb := newActions(t, tt.urls...)
			if err := a.QueueChanged(context.Background(), jobs.Queue, "carol", "PSP maintenance", "the web UI", tt.paused); err != nil {
				t.Fatal(err)
			}
			var got []ledger.AuditEntry
			_ = a.Ledger.Audit().Each(context.Background(), "", "", func(e ledger.AuditEntry) error {
				got = append(got, e)
				return nil
			})
			if len(got) != 1 || got[0].Actor != "carol" || got[0].To != tt.want || got[0].Context["note"] != "PSP maintenance" {
				t.Fatalf("global audit trail: %+v", got)
			}
			n := 0
			if info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(notify.Queue); err == nil {
				n = info.Pending
			}
			if n != tt.queued {
				t.Fatalf("%d notifications queued, want %d", n, tt.queued)
			}
		})
	}
}

func TestActionsNeedAnOperator(t *testing.T) {
	a, _ := newActions(t)
	a = a.As(everyone("carol"))
	if _, err := a.Approve(context.Background(), "b1", ledger.Approval{}); !errors.Is(err, ErrMissingOperator) || !errors.Is(err, ErrIncomplete) {
		t.Errorf("approve without --by: %v", err)
	}
	if _, err := a.Discard(context.Background(), "b1", "carol", ""); !errors.Is(err, ErrMissingOperator) {
		t.Errorf("discard without a note: %v", err)
	}
	if _, err := (UIControls{Actions: a}).Approve(asPerson(context.Background(), "carol"), "nosuch", "carol", ""); !errors.Is(err, ui.ErrRefused) || !errors.Is(err, ErrNotFound) {
		t.Errorf("approve of an unknown batch in the UI: %v, want a refusal", err)
	}
}

// An approval whose creates cannot be enqueued stands: Approve says so
// (ErrNotEnqueued), the UI shows it done (ui.ErrPartlyDone, not a
// refusal) and both tell the operator the reconciler enqueues the rest.
func TestApprovalNotEnqueuedStands(t *testing.T) {
	rdb := fakeredis.Working(t)
	qrdb := fakeredis.Refusing(t)
	a := &Actions{Ledger: ledger.New(rdb), Queue: queue.New(qrdb), Log: zerolog.Nop()}
	ctx := context.Background()
	hold := func(name string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), name+".csv")
		if err := os.WriteFile(p, []byte("externalId,amount,telecomOperator\n"+name+"-1,10.50,MTS\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ld := loader.New(a.Ledger, queue.New(rdb), vault.Ephemeral(), zerolog.Nop())
		res, err := ld.LoadFile(ctx, p, loader.Options{Approval: loader.Approval{Required: true, By: "bob"}})
		if err != nil || res.Held == "" {
			t.Fatalf("load %s: %v %+v", name, err, res)
		}
		return res.Batch
	}
	r, err := a.As(everyone("carol")).Approve(ctx, hold("cli"), ledger.Approval{By: "carol"})
	if !errors.Is(err, ErrNotEnqueued) || errors.Is(err, ErrRefused) || r.Batch.Phase != lifecycle.PhaseLoaded {
		t.Fatalf("approve with the queue down: %v, phase %q", err, r.Batch.Phase)
	}
	if msg := r.Words(); !strings.Contains(msg, "approved by carol") || !strings.HasSuffix(msg, LeftToReconciler) {
		t.Fatalf("message: %q", msg)
	}
	msg, err := UIControls{Actions: a}.Approve(asPerson(ctx, "carol"), hold("ui"), "carol", "")
	if !errors.Is(err, ui.ErrPartlyDone) || errors.Is(err, ui.ErrRefused) || !strings.Contains(msg, LeftToReconciler) {
		t.Fatalf("UI approve with the queue down: %q, %v", msg, err)
	}
}
