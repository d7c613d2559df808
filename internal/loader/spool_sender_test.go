//go:build unix

package loader

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/ledger"
)

// TestSpoolSender: a dropped file is loaded by its control file's
// submitter, else by its delivery account as a system identity, which is
// never a person for four-eyes; a submitter with an invisible character
// refuses the file.
func TestSpoolSender(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	account := "system:spool(uid " + me.Uid + " " + me.Username + ")"
	tests := []struct {
		name, ctl string
		loadedBy  string // "" : refused
	}{
		{name: "no control file", loadedBy: account},
		{name: "control file without a submitter", ctl: "rows=4\n", loadedBy: account},
		{name: "a submitter", ctl: "rows=4\nsubmitter= Carol@Example.com\n", loadedBy: "carol@example.com"},
		{name: "a submitter with a zero-width space", ctl: "submitter=carol\u200b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			dir, in := newSpool(t)
			writeFile(t, in, "p.csv", stallFile)
			if tt.ctl != "" {
				writeFile(t, in, "p.csv.ctl", tt.ctl)
			}
			o := SpoolOptions{Delivery: DeliveryRename, Load: Options{Approval: Approval{Required: true, FourEyes: true}}}
			res, err := f.ld.Spool(context.Background(), dir, o)
			if err != nil || len(res.Files) != 1 {
				t.Fatalf("%+v %v", res, err)
			}
			if tt.loadedBy == "" {
				errs, _ := os.ReadFile(filepath.Join(dir, Outbox, "p.csv.errors.csv"))
				if res.Files[0].Loaded || !strings.Contains(string(errs), "U+200B") {
					t.Fatalf("loaded %v, errors:\n%s", res.Files[0].Loaded, errs)
				}
				return
			}
			b, err := f.led.Batch(context.Background(), res.Files[0].Batch)
			if err != nil || b.LoadedBy != tt.loadedBy {
				t.Fatalf("loaded by %q (%v), want %q", b.LoadedBy, err, tt.loadedBy)
			}
			// The delivery account is nobody: its own name may approve.
			approve := func(by string) error {
				_, err := f.led.Controls().Approve(context.Background(), b.ID, ledger.Approval{By: by, FourEyes: true})
				return err
			}
			if identity.IsSystem(b.LoadedBy) {
				if err := approve(me.Username); err != nil {
					t.Fatalf("the account's name refused as approver of a system load: %v", err)
				}
			} else if err := approve("carol@example.com"); !errors.Is(err, ledger.ErrFourEyes) {
				t.Fatalf("the submitter approving their own file: %v, want ErrFourEyes", err)
			}
		})
	}
}
