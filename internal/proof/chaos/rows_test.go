package chaos

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/sandbox"
)

func TestGenerate(t *testing.T) {
	tests := []struct {
		rows, files       int
		declined, refused int
	}{
		{rows: 1, files: 1},
		{rows: 200, files: 1, declined: 1, refused: 1},
		{rows: 1000, files: 4, declined: 5, refused: 5},
		{rows: 10000, files: 10, declined: 50, refused: 50},
		{rows: 7, files: 7},
	}
	for _, tt := range tests {
		files := Generate(rand.New(rand.NewPCG(1, 2)), "abc123", tt.rows, tt.files)
		if len(files) != tt.files {
			t.Fatalf("%d rows in %d files: got %d files", tt.rows, tt.files, len(files))
		}
		seenID, seenCard := map[string]bool{}, map[string]bool{}
		var n, declined, refused int
		total := money.Zero
		for _, f := range files {
			if len(f.Rows) < tt.rows/tt.files || len(f.Rows) > tt.rows/tt.files+1 {
				t.Errorf("%s: %d rows, want an even split of %d over %d", f.Name, len(f.Rows), tt.rows, tt.files)
			}
			for _, r := range f.Rows {
				n++
				total = total.Add(r.Amount)
				if seenID[r.ExternalID] {
					t.Errorf("externalId %s twice", r.ExternalID)
				}
				seenID[r.ExternalID] = true
				if r.File != f.Name {
					t.Errorf("%s: row of file %q", f.Name, r.File)
				}
				if (r.Card == "") == (r.Telecom == "") {
					t.Errorf("%s: want exactly one destination", r.ExternalID)
				}
				isRefused := r.Amount.Cmp(money.MustParse(sandbox.RefusedAmount)) == 0
				switch r.Magic {
				case MagicDeclined:
					declined++
					if r.Card != sandbox.DeclinedCard {
						t.Errorf("%s: declined row with another card", r.ExternalID)
					}
				case MagicRefused:
					refused++
					if !isRefused {
						t.Errorf("%s: refused row with amount %s", r.ExternalID, r.AmountText)
					}
				default:
					if r.Card == sandbox.DeclinedCard || isRefused {
						t.Errorf("%s: ordinary row with a magic value", r.ExternalID)
					}
				}
				if r.Card != "" && r.Magic == NotMagic {
					if len(r.Card) != generatedCardDigits || !card.Luhn(r.Card) || seenCard[r.Card] {
						t.Errorf("%s: card not 16 Luhn-valid distinct digits", r.ExternalID)
					}
					seenCard[r.Card] = true
					if d, err := card.Normalize(r.CardText); err != nil || d != r.Card {
						t.Errorf("%s: card text does not normalise to the card", r.ExternalID)
					}
				}
			}
		}
		if n != tt.rows || declined != tt.declined || refused != tt.refused {
			t.Errorf("%d rows: got %d rows, %d declined, %d refused; want %d declined, %d refused",
				tt.rows, n, declined, refused, tt.declined, tt.refused)
		}
		// Every file is valid for the loader, row for row.
		sum := money.Zero
		for _, f := range files {
			s, errs, err := payfile.Collect(context.Background(), f.Name, bytes.NewReader(f.CSV()), payfile.Options{})
			if err != nil || len(errs) > 0 || s.Aborted {
				t.Fatalf("%s: not a valid payout file: %v %v", f.Name, err, errs)
			}
			if s.ValidRows != len(f.Rows) {
				t.Errorf("%s: %d valid rows, want %d", f.Name, s.ValidRows, len(f.Rows))
			}
			sum = sum.Add(s.Total)
		}
		if sum.Cmp(total) != 0 {
			t.Errorf("files total %s, rows total %s", sum, total)
		}
	}
}

func TestGenerateIsReproducible(t *testing.T) {
	a := Generate(rand.New(rand.NewPCG(7, 7)), "r", 300, 3)
	b := Generate(rand.New(rand.NewPCG(7, 7)), "r", 300, 3)
	c := Generate(rand.New(rand.NewPCG(8, 7)), "r", 300, 3)
	if !bytes.Equal(a[1].CSV(), b[1].CSV()) {
		t.Error("same seed, different files")
	}
	if bytes.Equal(a[1].CSV(), c[1].CSV()) {
		t.Error("different seeds, same files")
	}
}

func TestGenerateWritesSomeCardsGrouped(t *testing.T) {
	var grouped int
	for _, f := range Generate(rand.New(rand.NewPCG(3, 3)), "g", 1000, 1) {
		for _, r := range f.Rows {
			if r.Card != "" && r.CardText != r.Card {
				grouped++
				if !strings.ContainsAny(r.CardText, " -") {
					t.Errorf("%s: %q is neither the card nor grouped", r.ExternalID, r.CardText)
				}
			}
		}
	}
	if grouped == 0 {
		t.Error("no grouped card numbers: the leak scan's separator handling goes untested")
	}
}
