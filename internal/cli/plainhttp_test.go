package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestPlainHTTPPSPURL: an http:// --psp-url to a host that is not loopback
// is a usage error of worker and run (issue 38: it started without a
// word), accepted with --allow-plain-http or PAYOUT_ALLOW_PLAIN_HTTP;
// loopback is always accepted. Accepted, the command goes on and meets
// the unreachable Redis (exit 3).
func TestPlainHTTPPSPURL(t *testing.T) {
	_, key := newRing(t)
	base := map[string]string{"PAYOUT_PSP_TOKEN": "tok", "PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error"}
	redisDown := []string{"--redis", "redis://127.0.0.1:1/0"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
		msg  string
	}{
		{"worker, http to another host", []string{"worker", "--psp-url", "http://psp.example.com"}, nil, ExitUsage, "plain http to psp.example.com"},
		{"worker, http to an address", []string{"worker", "--psp-url", "http://10.1.2.3:8080/api"}, nil, ExitUsage, "plain http to 10.1.2.3"},
		{"worker, http with the flag", []string{"worker", "--allow-plain-http", "--psp-url", "http://psp.example.com"}, nil, ExitInfra, ""},
		{"worker, http with the variable", []string{"worker", "--psp-url", "http://psp.example.com"}, map[string]string{"PAYOUT_ALLOW_PLAIN_HTTP": "true"}, ExitInfra, ""},
		{"worker, http to localhost", []string{"worker", "--psp-url", "http://localhost:8090"}, nil, ExitInfra, ""},
		{"worker, http to ::1", []string{"worker", "--psp-url", "http://[::1]:8090"}, nil, ExitInfra, ""},
		{"worker, https", []string{"worker", "--psp-url", "https://psp.example.com"}, nil, ExitInfra, ""},
		{"worker, not a URL", []string{"worker", "--psp-url", "psp.example.com"}, nil, ExitUsage, "want an absolute https:// URL"},
		{"run, http to another host", []string{"run", "--psp-url", "http://psp.example.com", "../../samples/payouts-good.csv"}, nil, ExitUsage, "plain http to psp.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errb strings.Builder
			args := append(append([]string{}, tt.args...), redisDown...)
			code := Main(ctx, args, nil, &out, &errb, func(k string) string { return env[k] })
			if code != tt.want || !strings.Contains(errb.String(), tt.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s%s", code, tt.want, tt.msg, out.String(), errb.String())
			}
		})
	}
}
