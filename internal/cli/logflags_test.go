package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestTextLogHasNoColourOffATerminal: --log-format text written to a file
// or a pipe (journald, a log file) carries no ANSI escape codes.
func TestTextLogHasNoColourOffATerminal(t *testing.T) {
	for _, format := range []string{"text", "auto", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			e := &env{stderr: &buf, getenv: func(string) string { return "" }}
			lf := logFlags{level: "info", format: format}
			log, err := lf.logger(e)
			if err != nil {
				t.Fatal(err)
			}
			log.Warn().Str("batch", "b1").Msg("Redis unreachable")
			if strings.Contains(buf.String(), "\x1b[") {
				t.Errorf("log off a terminal has ANSI codes: %q", buf.String())
			}
			if !strings.Contains(buf.String(), "Redis unreachable") {
				t.Errorf("log lost its message: %q", buf.String())
			}
		})
	}
}

// TestUnknownFlagSaysDidYouMean: a mistyped flag gets one line naming it,
// the closest flag and where the list is, not the command's whole usage.
func TestUnknownFlagSaysDidYouMean(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"load", "--dry-rn", "x.csv"}, "flag provided but not defined: --dry-rn; did you mean --dry-run? (payout load -h lists the flags)"},
		{[]string{"status", "--redis", "redis://127.0.0.1:1/0", "--wach"}, "did you mean --watch?"},
		{[]string{"load", "--zzzzzzzz", "x.csv"}, "flag provided but not defined: --zzzzzzzz (payout load -h lists the flags)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out, errs bytes.Buffer
			code := Main(t.Context(), tt.args, nil, &out, &errs, func(string) string { return "" })
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(errs.String(), tt.want) {
				t.Errorf("stderr %q, want %q", errs.String(), tt.want)
			}
			if n := strings.Count(errs.String(), "\n"); n > 2 {
				t.Errorf("%d lines for one wrong flag:\n%s", n, errs.String())
			}
		})
	}
}
