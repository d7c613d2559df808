package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestTokenCommand: payout token create prints the token once (stdout)
// and lists it by name and role, never the token; revoke removes it; with
// a roles file only an admin manages tokens.
func TestTokenCommand(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr() + "/0"
	roles := filepath.Join(t.TempDir(), "roles")
	if err := os.WriteFile(roles, []byte("person root-admin: admin\nperson alice: maker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runEnv := func(env []string, who string, args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := MainWith(t.Context(), append([]string{"token"}, append(args, "--redis", url, "--log-level", "error")...), nil, &out, &errs, env,
			Hooks{Account: func() (string, string) { return "1000", who }})
		return code, out.String(), errs.String()
	}
	run := func(who string, args ...string) (int, string, string) { return runEnv(nil, who, args...) }
	code, secret, errs := run("alice", "create", "erp", "--role", "maker")
	secret = strings.TrimSpace(secret)
	if code != ExitOK || !strings.HasPrefix(secret, "pyt_") || len(secret) < 50 || !strings.Contains(errs, "token:erp") {
		t.Fatalf("create: exit %d %q %s", code, secret, errs)
	}
	if code, _, errs := run("alice", "create", "erp", "--role", "viewer"); code != ExitUsage || !strings.Contains(errs, "exists") {
		t.Fatalf("create twice: exit %d %s", code, errs)
	}
	if code, _, errs := run("alice", "create", "root", "--role", "admin"); code != ExitUsage || !strings.Contains(errs, "never a token's") {
		t.Fatalf("an admin token: exit %d %s", code, errs)
	}
	code, list, _ := run("alice", "list")
	if code != ExitOK || !strings.Contains(list, "erp") || !strings.Contains(list, "maker") || strings.Contains(list, secret) {
		t.Fatalf("list: exit %d\n%s", code, list)
	}
	const refused = "no token managed: administering needs the admin role; alice holds viewer,maker"
	if code, _, errs := run("alice", "revoke", "erp", "--roles-file", roles); code != ExitRejected || !strings.Contains(errs, refused) {
		t.Fatalf("revoke by a maker under a roles file: exit %d %s", code, errs)
	}
	if code, _, errs := runEnv([]string{"PAYOUT_ROLES_FILE=" + roles}, "alice", "list"); code != ExitRejected || !strings.Contains(errs, refused) {
		t.Fatalf("list by a maker under PAYOUT_ROLES_FILE: exit %d %s", code, errs)
	}
	if code, _, errs := runEnv([]string{"PAYOUT_ROLES=" + roles}, "alice", "list"); code != ExitRejected || !strings.Contains(errs, refused) || !strings.Contains(errs, "PAYOUT_ROLES_FILE") {
		t.Fatalf("list by a maker under the old PAYOUT_ROLES: exit %d %s", code, errs)
	}
	if code, out, errs := run("root-admin", "revoke", "erp", "--roles-file", roles); code != ExitOK || !strings.Contains(out, "revoked by root-admin") {
		t.Fatalf("revoke by an admin: exit %d %s%s", code, out, errs)
	}
	if _, list, _ := run("alice", "list"); strings.Contains(list, "erp") {
		t.Fatalf("revoked token still listed:\n%s", list)
	}
}

// TestTokenRole: --role is checked against the roles before Redis is
// opened (no Redis here): token create needs a role a token may hold,
// list and revoke take none.
func TestTokenRole(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "erp"}, "token create needs --role"},
		{[]string{"create", "erp", "--role", "makr"}, `--role: unknown role "makr"`},
		{[]string{"create", "erp", "--role", "admin"}, "never a token's"},
		{[]string{"list", "--role", "maker"}, "--role is for token create; token list takes none"},
		{[]string{"revoke", "erp", "--role", "viewer"}, "--role is for token create"},
	} {
		var out, errs bytes.Buffer
		code := MainWith(t.Context(), append([]string{"token", "--redis", "redis://127.0.0.1:1/0"}, tt.args...), nil, &out, &errs, nil,
			Hooks{Account: func() (string, string) { return "1000", "alice" }})
		if code != ExitUsage || !strings.Contains(errs.String(), tt.want) {
			t.Errorf("%v: exit %d %s, want %q", tt.args, code, errs.String(), tt.want)
		}
	}
}
