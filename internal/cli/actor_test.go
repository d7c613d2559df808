package cli

import (
	"errors"
	"strings"
	"testing"
)

// cli's tests run each command as the person its --by (or PAYOUT_BY)
// names, as if that person had typed it, and as "tester" without --by; the
// tests below replace this with one fixed account.
func init() {
	accountOf = func(by string) (osAccount, error) {
		if by = strings.TrimSpace(by); by != "" {
			return osAccount{UID: "1000", Name: by}, nil
		}
		return osAccount{UID: "1000", Name: "tester"}, nil
	}
}

// withAccount runs f with every command under the account acct.
func withAccount(acct osAccount, f func()) {
	old := accountOf
	accountOf = func(string) (osAccount, error) { return acct, nil }
	defer func() { accountOf = old }()
	f()
}

// runAs makes every command of the test run under the account acct.
func runAs(t *testing.T, acct osAccount) {
	t.Helper()
	old := accountOf
	accountOf = func(string) (osAccount, error) { return acct, nil }
	t.Cleanup(func() { accountOf = old })
}

func TestActorFor(t *testing.T) {
	tests := []struct {
		name  string
		acct  osAccount
		sudo  string
		by    string
		want  string
		usage string // in the usage error; "" for none
	}{
		{name: "the os user", acct: osAccount{"1000", "alice"}, want: "alice"},
		{name: "--by the same person", acct: osAccount{"1000", "alice"}, by: " Alice ", want: "alice"},
		{name: "--by someone else", acct: osAccount{"1000", "alice"}, by: "bob", usage: "--by bob: this command runs as alice"},
		{name: "SUDO_USER from root", acct: osAccount{"0", "root"}, sudo: "alice", want: "alice"},
		{name: "SUDO_USER from root, --by someone else", acct: osAccount{"0", "root"}, sudo: "alice", by: "bob", usage: "runs as alice"},
		{name: "SUDO_USER ignored from another user", acct: osAccount{"1000", "alice"}, sudo: "bob", want: "alice"},
		{name: "SUDO_USER ignored, --by it", acct: osAccount{"1000", "alice"}, sudo: "bob", by: "bob", usage: "runs as alice"},
		{name: "root without sudo", acct: osAccount{"0", "root"}, want: "root"},
		{name: "--by with a zero-width space", acct: osAccount{"1000", "alice"}, by: "alice\u200b", usage: "U+200B"},
		{name: "SUDO_USER with a zero-width space", acct: osAccount{"0", "root"}, sudo: "alice\u200b", usage: "cannot be recorded"},
		{name: "--by a system", acct: osAccount{"1000", "alice"}, by: "system:spool(uid 1 x)", usage: "names systems"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runAs(t, tt.acct)
			e := &env{getenv: func(k string) string {
				if k == "SUDO_USER" {
					return tt.sudo
				}
				return ""
			}}
			got, err := actorFor(e, tt.by)
			if tt.usage == "" {
				if err != nil || got != tt.want {
					t.Fatalf("actorFor = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitUsage || !strings.Contains(err.Error(), tt.usage) {
				t.Fatalf("actorFor = %q, %v; want a usage error with %q", got, err, tt.usage)
			}
		})
	}
}
