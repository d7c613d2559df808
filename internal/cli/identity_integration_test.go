//go:build integration

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/redistest"
)

// identityBin runs the real payout binary with the environment of this
// process minus SUDO_USER, plus extra; it returns the exit code, stdout and
// stderr.
func identityBin(t *testing.T, bin string, extra []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SUDO_USER=") && !strings.HasPrefix(kv, "PAYOUT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// loadedBy reads who loaded the batch of file from payout status --json.
func loadedBy(t *testing.T, bin, url, file string) string {
	t.Helper()
	code, out, errs := identityBin(t, bin, nil, "status", "--json", "--redis", url, file)
	if code != ExitOK {
		t.Fatalf("status: %d %s", code, errs)
	}
	var st struct {
		LoadedBy string `json:"loadedBy"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		var list []struct {
			LoadedBy string `json:"loadedBy"`
		}
		if err2 := json.Unmarshal([]byte(out), &list); err2 != nil || len(list) != 1 {
			t.Fatalf("status --json: %v / %v\n%s", err, err2, out)
		}
		return list[0].LoadedBy
	}
	return st.LoadedBy
}

// TestFourEyesIsTwoPeopleThroughTheBinary: the real binary takes who acts
// from the operating system. The OS user loads under four-eyes; then, run
// by that same user, approve, discard, cancel and pause with --by bob are
// refused as usage errors (exit 2) and change nothing; approve without
// --by is refused by four-eyes; a --by with a zero-width space is refused.
// SUDO_USER names the person only through sudo as root: as root it is
// another person and approves; as anyone else it changes nothing.
func TestFourEyesIsTwoPeopleThroughTheBinary(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	url := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	me, err := identity.Canonical(u.Username)
	if err != nil {
		t.Fatal(err)
	}
	if me == "bob" {
		t.Fatal("this test needs an OS user other than bob")
	}
	file := filepath.Join(t.TempDir(), "fe.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,telecomOperator\nFE-1,10.50,MTS\nFE-2,20.00,MTS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := identityBin(t, bin, nil, "load", "--redis", url, "--insecure-plaintext", "--approval", "required", "--four-eyes", "--by", me, "--log-level", "error", file); code != ExitOK {
		t.Fatalf("load: %d\n%s%s", code, out, errs)
	}
	if by := loadedBy(t, bin, url, file); by != me {
		t.Fatalf("loaded by %q, want the OS user %q", by, me)
	}
	for _, args := range [][]string{
		{"approve", "--by", "bob", file},
		{"approve", "--by", "bob", "--four-eyes=false", file},
		{"discard", "--by", "bob", "--note", "wrong month", file},
		{"cancel", "--by", "bob", "--note", "duplicate", file, "FE-1"},
		{"pause", "--by", "bob", "--note", "maintenance"},
	} {
		code, out, errs := identityBin(t, bin, nil, append(args, "--redis", url)...)
		if code != ExitUsage || !strings.Contains(errs, "--by bob: this command runs as "+me) {
			t.Fatalf("%v run by %s: exit %d, want 2 naming who runs it\n%s%s", args, me, code, out, errs)
		}
	}
	code, _, errs := identityBin(t, bin, []string{"PAYOUT_BY=bob"}, "approve", "--redis", url, file)
	if code != ExitUsage {
		t.Fatalf("PAYOUT_BY=bob run by %s: exit %d\n%s", me, code, errs)
	}
	if code, _, errs := identityBin(t, bin, nil, "approve", "--redis", url, "--by", "bob\u200b", file); code != ExitUsage || !strings.Contains(errs, "U+200B") {
		t.Fatalf("--by with a zero-width space: exit %d\n%s", code, errs)
	}
	if code, _, errs := identityBin(t, bin, nil, "approve", "--redis", url, file); code != ExitRejected || !strings.Contains(errs, "four-eyes") {
		t.Fatalf("the loader approving: exit %d, want 1 (four-eyes)\n%s", code, errs)
	}
	code, out, errs := identityBin(t, bin, []string{"SUDO_USER=bob"}, "approve", "--redis", url, file)
	if u.Uid != "0" {
		// SUDO_USER is anyone's to set: believed from root only.
		if code != ExitRejected || !strings.Contains(errs, "four-eyes") {
			t.Fatalf("SUDO_USER=bob from %s (not root): exit %d, want 1 (four-eyes)\n%s%s", me, code, out, errs)
		}
		return
	}
	if code != ExitOK || !strings.Contains(out, "approved by bob") {
		t.Fatalf("bob through sudo: exit %d\n%s%s", code, out, errs)
	}
}

// TestSpoolAccountIsNotAPerson: a file dropped into the spool is loaded by
// its delivery account as a system identity, or by the submitter its
// control file names; the batch says which.
func TestSpoolAccountIsNotAPerson(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	url := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	spool := t.TempDir()
	inbox := filepath.Join(spool, "inbox")
	if err := os.MkdirAll(inbox, 0o750); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"a.csv": "", "b.csv": "rows=1\nsubmitter=Carol\n"}
	for name, ctl := range files {
		if err := os.WriteFile(filepath.Join(inbox, name), []byte("externalId,amount,telecomOperator\n"+strings.TrimSuffix(name, ".csv")+"-1,10.50,MTS\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(inbox, name+".ctl"), []byte(ctl), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errs := identityBin(t, bin, nil, "load", "--redis", url, "--insecure-plaintext", "--spool", spool, "--settle", "0s",
		"--approval", "required", "--four-eyes", "--log-level", "error"); code != ExitOK {
		t.Fatalf("load --spool: %d\n%s%s", code, out, errs)
	}
	want := map[string]string{"a.csv": "system:spool(uid " + u.Uid + " " + u.Username + ")", "b.csv": "carol"}
	for name := range files {
		if got := loadedBy(t, bin, url, filepath.Join(spool, "done", name)); got != want[name] {
			t.Errorf("%s loaded by %q, want %q", name, got, want[name])
		}
	}
}
