package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/scrub"
)

// TestTypedTextScrubbedAtTheDoor: a card number an operator pastes into
// the order id, the PSP status or the note of a resolution is stored
// masked, so that every reader (result and audit files, reports, history)
// gets it masked; a note with a control character or over scrub.MaxNote
// characters is refused with nothing written. (The console and payout
// resolve never record a typed order id: they ask the PSP first, refuse
// an id it does not confirm, and record the one it confirmed exactly,
// ResolveAsConfirmed: TestConfirmedOrderIDStoredExactly.)
func TestTypedTextScrubbedAtTheDoor(t *testing.T) {
	ctx := context.Background()
	l := reviewed(t)
	const pan = "4111 1111 1111 1111"
	r, err := l.resolveAsCreated(ctx, "b", "E1", "4111111111111111", "paid to "+pan,
		Resolution{By: "alice", Note: "card " + pan + " seen  in the\u00a0back office"})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Payout
	for field, v := range map[string]string{"order": p.OrderID, "pspstatus": p.PSPStatus, "rnote": p.ResolutionNote} {
		if strings.Contains(strings.NewReplacer(" ", "", "-", "").Replace(v), "4111111111111111") {
			t.Errorf("%s stored in clear: %q", field, v)
		}
		if !strings.Contains(v, "411111******1111") {
			t.Errorf("%s = %q, want the card masked", field, v)
		}
	}
	var audit []string
	if err := l.Audit().Each(ctx, "b", "E1", func(a AuditEntry) error {
		for _, v := range a.Context {
			audit = append(audit, v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if all := strings.Join(audit, "|"); strings.Contains(strings.ReplaceAll(all, " ", ""), "4111111111111111") {
		t.Errorf("audit holds the card: %s", all)
	}
}

func TestTypedTextRefused(t *testing.T) {
	ctx := context.Background()
	for name, do := range map[string]func(l *Ledger) error{
		"resolve note with CR": func(l *Ledger) error {
			_, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "alice", Note: "ok\rbob approved"})
			return err
		},
		"resolve note too long": func(l *Ledger) error {
			_, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "alice", Note: strings.Repeat("n", scrub.MaxNote+1)})
			return err
		},
		"order id with line break": func(l *Ledger) error {
			_, err := l.resolveAsCreated(ctx, "b", "E1", "WD-1\nbob", "", Resolution{By: "alice", Note: "seen"})
			return err
		},
		"name with escape": func(l *Ledger) error {
			_, err := l.ResolveAsRejected(ctx, "b", "E1", Resolution{By: "alice\x1b[2K", Note: "seen"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := reviewed(t)
			err := do(l)
			if !errors.Is(err, ErrBadResolution) || !errors.Is(err, scrub.ErrRefused) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			mustState(t, l, "b", "E1", lifecycle.NeedsReview)
		})
	}
	l, _ := newTestLedger(t)
	seed(t, l, "b", 1)
	if _, err := l.Cancel(ctx, "b", "E1", "alice", "why\r\nbob cancelled"); !errors.Is(err, scrub.ErrRefused) {
		t.Errorf("cancel with a CR in the note: %v", err)
	}
	mustState(t, l, "b", "E1", lifecycle.Queued)
	if err := l.Audit().Queue(ctx, "alice", "paused", "x\ry"); !errors.Is(err, scrub.ErrRefused) {
		t.Errorf("queue audit with a CR in the note: %v", err)
	}
}

// TestConfirmedOrderIDStoredExactly: the order id the PSP confirmed is
// the PSP's, not a person's text: a numeric id that passes the Luhn check
// is stored exactly as the PSP gave it (the outcome checks ask the PSP
// for it), while the name and the note of the same resolution are still
// scrubbed; an id that cannot be one is refused with nothing written.
func TestConfirmedOrderIDStoredExactly(t *testing.T) {
	ctx := context.Background()
	const order = "4111111111111111" // Luhn-valid, as some PSPs number orders
	const pan = "5555 5555 5555 4444"
	tests := []struct {
		name    string
		order   PSPOrder
		refused bool
	}{
		{"numeric, Luhn-valid", PSPOrder{OrderID: order, Status: "Processing"}, false},
		{"empty", PSPOrder{Status: "Processing"}, true},
		{"line break", PSPOrder{OrderID: "WD-1\nbob"}, true},
		{"surrounding space", PSPOrder{OrderID: " WD-1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := reviewed(t)
			r, err := l.ResolveAsConfirmed(ctx, "b", "E1", tt.order, Resolution{By: "alice", Note: "card " + pan + " seen"})
			if tt.refused {
				if !errors.Is(err, ErrBadResolution) {
					t.Fatalf("err = %v, want ErrBadResolution", err)
				}
				mustState(t, l, "b", "E1", lifecycle.NeedsReview)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.Get(ctx, "b", "E1")
			if err != nil {
				t.Fatal(err)
			}
			if p.State != lifecycle.Created || p.OrderID != order || r.Payout.OrderID != order || p.PSPStatus != "Processing" {
				t.Errorf("payout %s order %q status %q, want created with order %q exactly", p.State, p.OrderID, p.PSPStatus, order)
			}
			if strings.Contains(strings.ReplaceAll(p.ResolutionNote, " ", ""), "5555555555554444") || !strings.Contains(p.ResolutionNote, "555555******4444") {
				t.Errorf("note %q, want the card masked", p.ResolutionNote)
			}
		})
	}
}
