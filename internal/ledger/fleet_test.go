package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/vault"
)

// TestBeginCreateForeignKey: a create whose card number is sealed with a
// key the worker does not hold is held back (Foreign) with the payout
// untouched, in every stored form of a sealed value; a worker that holds
// the key, or a ledger without OpeningKeys, proceeds.
func TestBeginCreateForeignKey(t *testing.T) {
	ctx := context.Background()
	other, _ := vault.GenerateKey()
	sealer, openerOther := vault.Ephemeral(), mustRing(t, other)
	for _, tc := range []struct {
		name   string
		sealed string
		ring   *vault.Keyring
		want   decide.BeginAction
	}{
		{"held key", seal(t, sealer), sealer, decide.Proceed},
		{"other key", seal(t, sealer), openerOther, decide.Foreign},
		{"plain value, real ring", "plain:4111111111111111", openerOther, decide.Foreign},
		{"plain value, ring that opens plain", "plain:4111111111111111", openerOther.AllowPlaintext(), decide.Proceed},
		{"sealed value, plaintext ring", seal(t, sealer), vault.Plaintext(), decide.Foreign},
		{"malformed: fails to open later", "garbage", openerOther, decide.Proceed},
		{"no card", "", openerOther, decide.Proceed},
		{"no key list", seal(t, sealer), nil, decide.Proceed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := newTestLedger(t)
			if _, _, err := l.BeginBatch(ctx, Batch{ID: "b", File: "f.csv", LoadedAt: time.Now(), Rows: 1, Total: money.MustParse("1"), Scale: 2}); err != nil {
				t.Fatal(err)
			}
			if _, err := l.Register(ctx, "b", []NewPayout{{Line: 2, ExternalID: "E1", Amount: money.MustParse("1"), Sealed: tc.sealed}}, 2); err != nil {
				t.Fatal(err)
			}
			if err := l.FinishBatch(ctx, "b"); err != nil {
				t.Fatal(err)
			}
			wl := l
			if tc.ring != nil {
				wl = l.OpeningKeys(tc.ring.KeyIDs())
			}
			b, err := wl.BeginCreate(ctx, "b", "E1", 1)
			if err != nil {
				t.Fatal(err)
			}
			if b.Action != tc.want {
				t.Fatalf("action %s, want %s", b.Action, tc.want)
			}
			if tc.want != decide.Foreign {
				return
			}
			if b.KeyID == "" || b.Phase != "" {
				t.Errorf("foreign: key id %q, phase %q", b.KeyID, b.Phase)
			}
			p := mustState(t, l, "b", "E1", lifecycle.Queued)
			if p.Creates != 0 || p.Error != "" {
				t.Errorf("payout changed: creates %d, error %q", p.Creates, p.Error)
			}
			if n, _ := l.rdb.XLen(ctx, auditKey("b")).Result(); n != 0 {
				t.Errorf("%d audit entries, want none", n)
			}
		})
	}
}

func mustRing(t *testing.T, key string) *vault.Keyring {
	t.Helper()
	r, err := vault.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func seal(t *testing.T, r *vault.Keyring) string {
	t.Helper()
	s, err := r.Seal("4111111111111111", SealAD("b", "E1"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}
