package bench

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/sandbox"
)

func TestRowAtIsValidAndAvoidsSandboxMagic(t *testing.T) {
	seen := map[string]bool{}
	for i := 1; i <= 20_000; i++ {
		r := RowAt(i)
		if seen[r.ExternalID] {
			t.Fatalf("row %d: externalId %s repeated", i, r.ExternalID)
		}
		seen[r.ExternalID] = true
		a, err := money.Parse(r.Amount, 2)
		if err != nil || r.Amount == sandbox.RefusedAmount || a.String() != r.Amount {
			t.Fatalf("row %d: amount %q (canonical %q): %v", i, r.Amount, a.String(), err)
		}
		switch {
		case i%10 == 0:
			if r.Card != "" || r.Telecom == "" {
				t.Fatalf("row %d: want a telecom row, got %+v", i, r)
			}
		default:
			if len(r.Card) != 16 || !card.Luhn(r.Card) || r.Card == sandbox.DeclinedCard || r.Telecom != "" {
				t.Fatalf("row %d: card %q is not a valid, accepted 16-digit card", i, r.Card)
			}
		}
	}
}

// The generated file is one the loader accepts whole, and the rows it reads
// are the ones the baselines use.
func TestWriteFileIsAcceptedAndMatchesRowAt(t *testing.T) {
	const n = 2000
	path := filepath.Join(t.TempDir(), "p.csv")
	if err := WriteFile(path, n); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sum, errs, err := payfile.Collect(context.Background(), "p.csv", f, payfile.Options{})
	if err != nil || len(errs) > 0 {
		t.Fatalf("Collect: %v, %d errors (first %v)", err, len(errs), errs)
	}
	if sum.Rows != n || sum.ValidRows != n {
		t.Fatalf("rows %d valid %d, want %d", sum.Rows, sum.ValidRows, n)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	i := 0
	err = payfile.Each(context.Background(), "p.csv", f, payfile.Options{}, func(int) bool { return false }, func(r payfile.Row) error {
		i++
		want := RowAt(i)
		if r.ExternalID != want.ExternalID || r.CardNumber != want.Card || r.TelecomOperator != want.Telecom ||
			r.Destination() != want.Destination() || r.Amount.Cmp(mustAmount(t, want.Amount)) != 0 {
			t.Fatalf("row %d: file %+v, RowAt %+v", i, r, want)
		}
		return nil
	})
	if err != nil || i != n {
		t.Fatalf("Each: %v after %d rows", err, i)
	}
}

func mustAmount(t *testing.T, s string) money.Amount {
	t.Helper()
	a, err := money.Parse(s, 2)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The bare worker posts the very body the PSP client would send.
func TestBodyIsWhatThePSPClientSends(t *testing.T) {
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"amount":"1","status":"Created","externalId":"x","pspDepositOrderID":"P-1"}`)
	}))
	defer srv.Close()
	c, err := psp.New(psp.Config{BaseURL: srv.URL, Token: psp.StaticToken("t0ken")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, i := range []int{1, 7, 10, 123} {
		r := RowAt(i)
		req := psp.WithdrawalRequest{ExternalID: r.ExternalID, Amount: mustAmount(t, r.Amount)}
		if r.Card != "" {
			req.Properties = []psp.Property{{Key: psp.KeyCardNumber, Value: r.Card}}
		} else {
			req.Properties = []psp.Property{{Key: psp.KeyTelecomOperator, Value: r.Telecom}}
		}
		c.CreateWithdrawal(context.Background(), req)
		var want, have any
		if err := json.Unmarshal(<-got, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r.Body(), &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(want, have) {
			t.Errorf("row %d: PSP client sends %v, Body is %v", i, want, have)
		}
	}
}
