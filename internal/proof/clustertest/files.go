package clustertest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/sandbox"
)

// Row is one generated payout and what the simulator will make of it.
type Row struct {
	File       string
	ExternalID string
	Amount     money.Amount
	Card       string // full card number, "" for a telecom destination
	Declined   bool   // the simulator refuses it (declined card or refused amount)
}

// FileSpec says what to generate.
type FileSpec struct {
	Files   int
	PerFile int
	Seed    uint64
	// DeclineEvery makes every n-th row one the simulator refuses (0: none),
	// alternating a declined card and the refused amount.
	DeclineEvery int
	Prefix       string // externalId prefix, e.g. "CT"
}

// WriteFiles writes spec.Files payout files into dir and returns their paths
// and every row, keyed by externalId. The content is a function of the spec.
func WriteFiles(t testing.TB, dir string, spec FileSpec) ([]string, map[string]Row) {
	t.Helper()
	rng := rand.New(rand.NewPCG(spec.Seed, 0x9e3779b97f4a7c15))
	rows := map[string]Row{}
	var paths []string
	refused := money.MustParse(sandbox.RefusedAmount)
	for f := 0; f < spec.Files; f++ {
		name := fmt.Sprintf("%s-payouts-%02d.csv", strings.ToLower(spec.Prefix), f+1)
		path := filepath.Join(dir, name)
		var b strings.Builder
		b.WriteString("externalId,amount,cardNumber,telecomOperator\n")
		for i := 0; i < spec.PerFile; i++ {
			r := Row{File: name, ExternalID: fmt.Sprintf("%s-%02d-%05d", spec.Prefix, f+1, i+1)}
			r.Amount = money.FromMinor(100+rng.Int64N(500_000), 2)
			if r.Amount.Cmp(refused) == 0 {
				r.Amount = money.FromMinor(1314, 2)
			}
			n := f*spec.PerFile + i + 1
			switch {
			case spec.DeclineEvery > 0 && n%spec.DeclineEvery == 0 && (n/spec.DeclineEvery)%2 == 0:
				r.Card, r.Declined = sandbox.DeclinedCard, true
			case spec.DeclineEvery > 0 && n%spec.DeclineEvery == 0:
				r.Card, r.Amount, r.Declined = testCard(rng), refused, true
			case rng.IntN(10) == 0:
				// telecom destination
			default:
				r.Card = testCard(rng)
			}
			op := ""
			if r.Card == "" {
				op = []string{"MTS", "Beeline", "Megafon", "Tele2"}[rng.IntN(4)]
			}
			fmt.Fprintf(&b, "%s,%s,%s,%s\n", r.ExternalID, r.Amount.StringFixed(2), r.Card, op)
			rows[r.ExternalID] = r
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	return paths, rows
}

// testCard returns a random Luhn-valid 16-digit number starting with 4 that
// is not the simulator's declined card.
func testCard(rng *rand.Rand) string {
	for {
		body := fmt.Sprintf("4%014d", rng.Int64N(1e14))
		for d := byte('0'); d <= '9'; d++ {
			c := body + string(d)
			if card.Luhn(c) && c != sandbox.DeclinedCard {
				return c
			}
		}
	}
}
