package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/view"
)

// TestLoadNeedsTheMakerRole: with a roles file, payout load by a viewer
// is refused with the role it needs and loads nothing; a maker loads; a
// bad roles file is a usage error naming its line.
func TestLoadNeedsTheMakerRole(t *testing.T) {
	mr := miniredis.RunT(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "p.csv")
	roles := filepath.Join(dir, "roles")
	bad := filepath.Join(dir, "bad-roles")
	for p, text := range map[string]string{file: "externalId,amount,telecomOperator\nRL-1,10.50,MTS\n",
		roles: "person mo: maker\ndefault: viewer\n", bad: "person mo: makr\n"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"load", "--insecure-plaintext", "--allow-volatile-redis", "--approval", "required", "--redis", "redis://" + mr.Addr(), "--log-level", "error", file}
	env := map[string]string{"PAYOUT_ROLES_FILE": roles}
	withAccount(osAccount{"1000", "vic"}, func() {
		if code, _, errs := runMain(t, env, args...); code != ExitRejected || !strings.Contains(errs, "not loaded: uploading or loading a file needs the maker role; vic holds viewer") {
			t.Fatalf("a viewer's load: exit %d\n%s", code, errs)
		}
	})
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	if ids, _ := view.New(rdb).BatchIDs(context.Background()); len(ids) != 0 {
		t.Fatalf("a viewer's refused load left batches %v", ids)
	}
	withAccount(osAccount{"1000", "mo"}, func() {
		if code, _, errs := runMain(t, map[string]string{"PAYOUT_ROLES_FILE": bad}, args...); code != ExitUsage || !strings.Contains(errs, `bad-roles:1: unknown role "makr"`) {
			t.Fatalf("a bad roles file: exit %d\n%s", code, errs)
		}
		if code, out, errs := runMain(t, env, args...); code != ExitOK {
			t.Fatalf("a maker's load: exit %d\n%s%s", code, out, errs)
		}
	})
}

// TestEveryCommandChecksItsRole: with a roles file, every command that
// changes state or queues work refuses a viewer (exit 1, the role it
// needs named) and changes nothing; every read refuses a person the file
// names nowhere and lets a viewer read.
func TestEveryCommandChecksItsRole(t *testing.T) {
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles")
	file := filepath.Join(dir, "p.csv")
	for p, text := range map[string]string{roles: "person vic: viewer\nperson root-admin: admin\n",
		file: "externalId,amount,telecomOperator\nRL-1,10.50,MTS\n"} {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		who  string
		args []string
		want string // the refusal; "" when the command runs
	}{
		{"vic", []string{"load", "--insecure-plaintext", "--allow-volatile-redis", file}, "not loaded: uploading or loading a file needs the maker role; vic holds viewer"},
		{"vic", []string{"approve", "b"}, "not approved: approving needs the approver role; vic holds viewer"},
		{"vic", []string{"discard", "--note", "x", "b"}, "not discarded: discarding needs the approver role; vic holds viewer"},
		{"vic", []string{"cancel", "--note", "x", "b", "P1"}, "not cancelled: cancelling a payout needs the operator role; vic holds viewer"},
		{"vic", []string{"release", "--note", "x", "b", "P1"}, "not released: releasing a payout needs the operator role; vic holds viewer"},
		{"vic", []string{"resolve", "--recheck", "--note", "x", "b", "P1"}, "not resolved: rechecking a payout needs the operator role; vic holds viewer"},
		{"vic", []string{"pause", "--note", "x"}, "not paused: pausing the queue needs the operator role; vic holds viewer"},
		{"vic", []string{"resume", "--note", "x"}, "not resumed: resuming the queue needs the operator role; vic holds viewer"},
		{"vic", []string{"redeliver", "--event", "ev1", "0123456789ab"}, "not redelivered: redelivering webhook events needs the operator role; vic holds viewer"},
		{"vic", []string{"reconcile"}, "not reconciled: restoring the tasks of open payouts needs the operator role; vic holds viewer"},
		{"vic", []string{"archive", "--older-than", "1d", "--archive-dir", dir}, "not archived: archiving batches needs the operator role; vic holds viewer"},
		{"vic", []string{"token", "list"}, "no token managed: administering needs the admin role; vic holds viewer"},
		{"nobody", []string{"status"}, "not shown: reading needs the viewer role; nobody holds none"},
		{"nobody", []string{"status", "b"}, "not shown: reading needs the viewer role; nobody holds none"},
		{"nobody", []string{"history", "b"}, "not shown: reading needs the viewer role; nobody holds none"},
		{"nobody", []string{"report", "b"}, "not shown: reading needs the viewer role; nobody holds none"},
		{"vic", []string{"report", "--failed-only", "b"}, "not shown: uploading or loading a file needs the maker role; vic holds viewer"},
		{"nobody", []string{"resolve", "b"}, "not shown: reading needs the viewer role; nobody holds none"},
		{"nobody", []string{"reconcile", "--dry-run"}, "not reconciled: reading needs the viewer role; nobody holds none"},
		{"nobody", []string{"archive", "--dry-run", "--older-than", "1d", "--archive-dir", dir}, "not archived: reading needs the viewer role; nobody holds none"},
		{"vic", []string{"status", "b"}, ""},
		{"vic", []string{"history", "b"}, ""},
		{"vic", []string{"report", "b"}, ""},
		{"vic", []string{"resolve", "b"}, ""},
		{"vic", []string{"reconcile", "--dry-run"}, ""},
		{"vic", []string{"archive", "--dry-run", "--older-than", "1d", "--archive-dir", dir}, ""},
		{"root-admin", []string{"token", "list"}, ""},
	}
	// Every command is in the table but those that are no person's
	// command (servers, whose requests are checked one by one; the worker;
	// the local tools) and run, whose check is load's (mayLoad).
	covered := map[string]bool{"worker": true, "ui": true, "api": true, "sandbox": true, "dev": true, "keygen": true, "passwd": true, "run": true}
	for _, tt := range tests {
		covered[tt.args[0]] = true
	}
	for _, c := range commands() {
		if !covered[c.name] {
			t.Errorf("payout %s is not in the table: does it check its role?", c.name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.who+" "+strings.Join(tt.args[:1], " "), func(t *testing.T) {
			l, _, url := awaitingFixture(t)
			before := fmt.Sprint(l.Batch(context.Background(), "b"))
			args := append([]string{tt.args[0], "--redis", url}, tt.args[1:]...)
			var code int
			var out, errs string
			withAccount(osAccount{"1000", tt.who}, func() {
				code, out, errs = runMain(t, map[string]string{"PAYOUT_ROLES_FILE": roles}, args...)
			})
			if tt.want == "" {
				// report exits 1 for a batch not final: read, not refused
				if (code != ExitOK && code != ExitRejected) || strings.Contains(errs, " role; ") {
					t.Fatalf("%v by %s: exit %d\n%s%s", tt.args, tt.who, code, out, errs)
				}
				return
			}
			if code != ExitRejected || !strings.Contains(errs, tt.want) {
				t.Fatalf("%v by %s: exit %d, want 1 and %q\n%s%s", tt.args, tt.who, code, tt.want, out, errs)
			}
			if after := fmt.Sprint(l.Batch(context.Background(), "b")); after != before {
				t.Errorf("a refused %s changed the batch:\n%s\n%s", tt.args[0], before, after)
			}
		})
	}
}
