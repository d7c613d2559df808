package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRunRealPSPNeedsDurableRedis: `payout run` against anything but its
// own --sandbox refuses to start on the embedded Redis (exit 2), sends
// nothing to the PSP, and prints the command line to use, without a
// secret: a rerun after a kill would otherwise create every order again.
func TestRunRealPSPNeedsDurableRedis(t *testing.T) {
	var hits atomic.Int64
	psp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	defer psp.Close()
	const token = "tok-secret-0123456789"
	pspURL := strings.Replace(psp.URL, "http://", "http://user:pw-secret@", 1)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string // in the message
	}{
		{"flag", []string{"run", "--psp-url", pspURL, "--timeout", "5s", "../../samples/payouts-good.csv"},
			map[string]string{"PAYOUT_PSP_TOKEN": token},
			[]string{"payout run --redis redis://127.0.0.1:6379/0 --data-key-file data.key --psp-url http://USER:PASSWORD@" + strings.TrimPrefix(psp.URL, "http://") + " --timeout 5s ../../samples/payouts-good.csv",
				"(umask 077; payout keygen > data.key)", "redis-server --appendonly yes"}},
		{"environment, data key given", []string{"run", "my payouts.csv"},
			map[string]string{"PAYOUT_PSP_URL": pspURL, "PAYOUT_PSP_TOKEN": token, "PAYOUT_DATA_KEY": "k"},
			[]string{"payout run --redis redis://127.0.0.1:6379/0 'my payouts.csv'\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), tc.args, nil, &out, &errb, func(k string) string { return tc.env[k] })
			got := out.String() + errb.String()
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d (durable Redis required)\n%s", code, ExitUsage, got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
			for _, secret := range []string{token, "pw-secret"} {
				if strings.Contains(got, secret) {
					t.Errorf("output shows the secret %q:\n%s", secret, got)
				}
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the PSP got %d requests; want none before the Redis is settled", n)
	}
}
