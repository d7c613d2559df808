package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWorkerMailFlags: the mail flags of payout worker are checked before
// Redis is reached: a missing companion flag, an SMTP URL with a password,
// plain SMTP to a remote host and a wrong recipients file are usage errors
// (exit 2) that never show the password; good flags go on to the
// unreachable Redis (exit 3).
func TestWorkerMailFlags(t *testing.T) {
	_, key := newRing(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := write("pw", "s3cret\n")
	good := write("recipients", "approvers: ann@example.com\noperators: ops@example.com\n")
	bad := write("bad", "approvers: ann@example.com\nopertors: ops@example.com\n")
	env := map[string]string{"PAYOUT_PSP_TOKEN": "tok", "PAYOUT_DATA_KEY": key, "PAYOUT_LOG_LEVEL": "error"}
	full := func(url string, more ...string) []string {
		return append([]string{"--smtp-url", url, "--mail-from", "payout@example.com", "--mail-recipients", good, "--console-url", "https://payout.example.com"}, more...)
	}
	tests := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"alone", []string{"--smtp-url", "smtp://mail.example.com"}, ExitUsage, "--smtp-url needs --mail-from"},
		{"password in the URL", full("smtp://u:s3cret@mail.example.com"), ExitUsage, "--smtp-password-file"},
		{"plain to a remote host", full("smtp://mail.example.com", "--smtp-allow-plain"), ExitUsage, "loopback"},
		{"user without password", full("smtps://payout@mail.example.com"), ExitUsage, "no --smtp-password-file"},
		{"bad recipients", []string{"--smtp-url", "smtp://mail.example.com", "--mail-from", "p@example.com", "--mail-recipients", bad, "--console-url", "https://c.example.com"}, ExitUsage, bad + ":2: unknown key \"opertors\""},
		{"digest too often", full("smtp://mail.example.com", "--mail-digest-every", "10s"), ExitUsage, "at least 1m"},
		{"good", full("smtps://payout@mail.example.com", "--smtp-password-file", pw), ExitInfra, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out, errb strings.Builder
			args := append(append([]string{"worker", "--psp-url", "https://psp.example.com"}, tt.args...), "--redis", "redis://127.0.0.1:1/0")
			code := Main(ctx, args, nil, &out, &errb, func(k string) string { return env[k] })
			if code != tt.want || !strings.Contains(errb.String(), tt.msg) {
				t.Fatalf("exit %d, want %d with %q:\n%s%s", code, tt.want, tt.msg, out.String(), errb.String())
			}
			if strings.Contains(out.String()+errb.String(), "s3cret") {
				t.Fatalf("the SMTP password was shown:\n%s%s", out.String(), errb.String())
			}
		})
	}
}
