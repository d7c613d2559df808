package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/acme/payout/internal/ui"
	"golang.org/x/crypto/bcrypt"
)

func TestPasswd(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string // in stderr when refused
	}{
		{"a line the UI reads", []string{"alice"}, "correct horse battery\n", ExitOK, ""},
		{"short password", []string{"alice"}, "hunter2\n", ExitUsage, "at least 12"},
		{"no name", nil, "correct horse battery\n", ExitUsage, "give one login name"},
		{"a name the UI refuses", []string{"ali ce"}, "correct horse battery\n", ExitUsage, "users file"},
		{"cost too low", []string{"--cost", "5", "alice"}, "correct horse battery\n", ExitUsage, "--cost 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := Main(t.Context(), append([]string{"passwd", "--cost", "10"}, tt.args...), strings.NewReader(tt.stdin), &out, &errs, func(string) string { return "" })
			if code != tt.code {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, errs.String())
			}
			if code != ExitOK {
				if !strings.Contains(errs.String(), tt.want) || out.Len() != 0 {
					t.Fatalf("stderr %q (stdout %q), want %q and nothing printed", errs.String(), out.String(), tt.want)
				}
				return
			}
			line := strings.TrimSpace(out.String())
			if _, err := ui.ParseUsers("users", strings.NewReader(line+"\n")); err != nil {
				t.Fatalf("the UI refuses the line %q: %v", line, err)
			}
			name, hash, _ := strings.Cut(line, ":")
			if name != "alice" || bcrypt.CompareHashAndPassword([]byte(hash), []byte("correct horse battery")) != nil {
				t.Fatalf("line %q does not hold alice's password", line)
			}
			if strings.Contains(out.String()+errs.String(), "correct horse") {
				t.Fatal("the password was printed")
			}
		})
	}
}
