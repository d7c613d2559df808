//go:build integration

package cli

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/vault"
)

// TestPasswordProtectedRedis: load, status and report work against a Redis
// that requires a password; a wrong password is a configuration error
// (exit 2) and the password never appears in the output.
func TestPasswordProtectedRedis(t *testing.T) {
	const pass = "s3cret-Pa55"
	srv := redistest.Start(t, "--requirepass", pass)
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"PAYOUT_DATA_KEY": key, "PAYOUT_REDIS_URL": fmt.Sprintf("redis://:%s@%s/3", pass, srv.Addr)}[k]
	}
	run := func(getenv func(string) string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, nil, &out, &errb, getenv)
		return code, out.String() + errb.String()
	}
	if code, out := run(env, "load", "--allow-volatile-redis", "--log-level", "error", "../../samples/payouts-good.csv"); code != ExitOK || !strings.Contains(out, "loaded 20 rows") {
		t.Fatalf("load: exit %d\n%s", code, out)
	}
	if code, out := run(env, "status", "--json", "../../samples/payouts-good.csv"); code != ExitOK || !strings.Contains(out, `"queued": 20`) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	wrong := func(k string) string {
		if k == "PAYOUT_REDIS_URL" {
			return fmt.Sprintf("redis://:wrong-one@%s/3", srv.Addr)
		}
		return env(k)
	}
	code, out := run(wrong, "status")
	if code != ExitUsage {
		t.Fatalf("wrong password: exit %d, want %d\n%s", code, ExitUsage, out)
	}
	if strings.Contains(out, "wrong-one") || strings.Contains(out, pass) {
		t.Fatalf("a password appears in the output:\n%s", out)
	}
}
