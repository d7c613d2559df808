package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/rs/zerolog"
)

// dyingSealer seals like its keyring until its nth call, which fails: the
// loader stops reading there, as a loader killed mid-file would, after the
// chunks already handed to the registrar are written.
type dyingSealer struct {
	*vault.Keyring
	calls, nth int
}

var errDied = errors.New("loader died")

func (s *dyingSealer) Seal(plaintext, ad string) (string, error) {
	s.calls++
	if s.calls == s.nth {
		return "", errDied
	}
	return s.Keyring.Seal(plaintext, ad)
}

// TestRefusedRerunKeepsClaimsOfRegisteredRows: a refused load releases
// only the externalId claims it took itself, and never one of a row the
// ledger holds for the batch, so no later file can claim that id and pay
// it a second time.
func TestRefusedRerunKeepsClaimsOfRegisteredRows(t *testing.T) {
	const valid = 12
	var b strings.Builder
	b.WriteString("externalId,amount,cardNumber\n")
	var ids []string
	for i := 1; i <= valid; i++ {
		ids = append(ids, fmt.Sprintf("K-%02d", i))
		fmt.Fprintf(&b, "K-%02d,1.00,4111111111111111\n", i)
	}
	b.WriteString("K-99,-5,4111111111111111\n") // the bad row: --partial or nothing
	content := b.String()

	tests := []struct {
		name string
		// before puts the ledger in the state the refused run meets.
		before func(t *testing.T, f *fixture, path, batch string)
		// registered is how many rows the ledger holds before the rerun.
		registered int
		// kept lists the rows not registered whose claims survive the
		// refusal: those an earlier run took, or all of them when the
		// refused run could not take the batch's load lock.
		kept func(registered map[string]bool) []string
		// busy: the rerun finds the load lock held and does nothing.
		busy bool
		// otherOptions: the rerun is refused for options other than the
		// first run's, before its claim pass.
		otherOptions bool
	}{
		{
			// The issue: load with --partial, die mid-load, run again
			// without --partial. The rerun took no claim at all: every row
			// was claimed by the dead run.
			name: "partial run killed mid-load",
			before: func(t *testing.T, f *fixture, path, batch string) {
				ld := New(f.led, queue.New(f.rdb), &dyingSealer{Keyring: f.ring, nth: 8}, zerolog.Nop())
				res, err := ld.LoadFile(context.Background(), path, Options{Partial: true, ChunkSize: 1, EnqueueWorkers: 1})
				if !errors.Is(err, errDied) {
					t.Fatalf("partial run: err = %v, want it to die (%+v)", err, res)
				}
			},
			registered: 7, // the chunks handed over before the 8th row
			kept:       func(registered map[string]bool) []string { return unregistered(ids, registered) },
			// Without --partial the rerun reads the file otherwise: it
			// is refused before it claims anything (ErrOtherOptions).
			otherOptions: true,
		},
		{
			// This run's claim pass takes the ids of rows a concurrent
			// loader of the same content registers before the refusal
			// releases anything (their claims had been dropped).
			name: "rows registered after this run claimed them",
			before: func(t *testing.T, f *fixture, path, batch string) {
				ctx := context.Background()
				if _, _, err := f.led.BeginBatch(ctx, ledger.Batch{ID: batch, File: "a.csv", Rows: valid, Total: money.MustParse("12.00"), Scale: 2}); err != nil {
					t.Fatal(err)
				}
				var ps []ledger.NewPayout
				for i, id := range ids[:5] {
					ps = append(ps, ledger.NewPayout{Line: i + 2, ExternalID: id, Amount: money.MustParse("1.00"), Destination: "card"})
				}
				if _, err := f.led.Register(ctx, batch, ps, 2); err != nil {
					t.Fatal(err)
				}
			},
			registered: 5,
			kept:       func(map[string]bool) []string { return nil },
		},
		{
			// Another loader holds the batch's load lock: the rerun takes
			// it before its first claim, so it claims nothing at all.
			name: "load lock held by another loader",
			before: func(t *testing.T, f *fixture, path, batch string) {
				if ok, err := f.led.Locks().LockLoad(context.Background(), batch, "another-loader", time.Minute); !ok || err != nil {
					t.Fatalf("lock: %v %v", ok, err)
				}
			},
			kept: func(registered map[string]bool) []string { return nil },
			busy: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			dir := t.TempDir()
			path := writeFile(t, dir, "a.csv", content)
			dry, err := f.ld.LoadFile(ctx, path, Options{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			batch := dry.Batch
			tt.before(t, f, path, batch)
			registered := map[string]bool{}
			var first string
			for _, id := range ids {
				if _, err := f.led.Get(ctx, batch, id); err == nil {
					registered[id] = true
					if first == "" {
						first = id
					}
				} else if !errors.Is(err, ledger.ErrNotFound) {
					t.Fatal(err)
				}
			}
			if len(registered) != tt.registered {
				t.Fatalf("%d rows registered before the rerun, want %d", len(registered), tt.registered)
			}

			res, err := f.ld.LoadFile(ctx, path, Options{})
			if tt.busy {
				if err != nil || !res.Busy || res.Loaded {
					t.Fatalf("rerun with the lock held elsewhere: %+v %v, want busy", res, err)
				}
			} else if tt.otherOptions {
				if !errors.Is(err, ErrOtherOptions) || res.Loaded {
					t.Fatalf("rerun without --partial: %+v %v, want refused for its other options", res, err)
				}
			} else if err != nil || res.Loaded || len(res.Errors) != 1 {
				t.Fatalf("rerun without --partial: %+v %v, want refused for its bad row", res, err)
			}

			owners, err := f.led.Claims().Owners(ctx, "someone-else", ids)
			if err != nil {
				t.Fatal(err)
			}
			for id := range registered {
				if owners[id] != batch {
					t.Errorf("registered row %s: claim owned by %q, want batch %s", id, owners[id], batch)
				}
			}
			kept := map[string]bool{}
			for _, id := range tt.kept(registered) {
				kept[id] = true
			}
			for _, id := range ids {
				switch {
				case registered[id]:
				case kept[id] && owners[id] != batch:
					t.Errorf("row %s: claim owned by %q, want batch %s kept", id, owners[id], batch)
				case !kept[id] && owners[id] != "":
					t.Errorf("row %s: claim of the refused run kept (owned by %q)", id, owners[id])
				}
			}

			// A different file with a registered externalId is refused.
			if first != "" {
				other := fmt.Sprintf("externalId,amount,telecomOperator\nZ-1,5,MTS\n%s,7,MTS\n", first)
				res, err := f.ld.LoadFile(ctx, writeFile(t, dir, "other.csv", other), Options{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Loaded || len(res.Errors) != 1 || res.Errors[0].Line != 3 || !errors.Is(res.Errors[0], payfile.KindDuplicate) {
					t.Fatalf("a file with registered %s: %+v, want refused for line 3", first, res)
				}
			}
		})
	}
}

func unregistered(ids []string, registered map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if !registered[id] {
			out = append(out, id)
		}
	}
	return out
}
