package cli

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/fakeredis"
	"github.com/acme/payout/internal/ui"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"
)

// TestUIMaxUploads: --max-uploads (or PAYOUT_MAX_UPLOADS) reaches the
// UI's Config.MaxUploads; below 1 it is a usage error, before any
// connection is made.
func TestUIMaxUploads(t *testing.T) {
	creds := map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int // Config.MaxUploads; 0: refused
	}{
		{"default", nil, nil, ui.DefaultMaxUploads},
		{"flag", []string{"--max-uploads", "5"}, nil, 5},
		{"one", []string{"--max-uploads", "1"}, nil, 1},
		{"environment", nil, map[string]string{"PAYOUT_MAX_UPLOADS": "3"}, 3},
		{"zero", []string{"--max-uploads", "0"}, nil, 0},
		{"negative", []string{"--max-uploads", "-1"}, nil, 0},
		{"zero from the environment", nil, map[string]string{"PAYOUT_MAX_UPLOADS": "0"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--spool", t.TempDir(), "--insecure-plaintext"}, tc.args...)
			if tc.want == 0 {
				env := map[string]string{}
				for k, v := range creds {
					env[k] = v
				}
				for k, v := range tc.env {
					env[k] = v
				}
				// An unreachable Redis: without the check the exit would be ExitInfra.
				code, _, errs := runMain(t, env, append([]string{"ui", "--redis", "redis://127.0.0.1:1/0"}, args...)...)
				if code != ExitUsage || !strings.Contains(errs, "--max-uploads") || !strings.Contains(errs, "want at least 1") {
					t.Fatalf("exit %d, want %d with a --max-uploads usage error: %s", code, ExitUsage, errs)
				}
				return
			}
			e, _, _ := testEnv(tc.env)
			fs := newFlags(e, "ui", "")
			var cf uiControlFlags
			cf.register(fs)
			if err := parse(e, fs, args); err != nil {
				t.Fatal(err)
			}
			p, err := cf.prepare(e)
			if err != nil {
				t.Fatal(err)
			}
			var cfg ui.Config
			cf.configure(p, &cfg, fakeredis.Working(t), zerolog.Nop())
			if cfg.Uploads == nil || cfg.MaxUploads != tc.want {
				t.Fatalf("Config.MaxUploads %d (uploads %v), want %d", cfg.MaxUploads, cfg.Uploads != nil, tc.want)
			}
		})
	}
}

var (
	usersHashOnce sync.Once
	usersHash     string
)

// usersFile writes a users file of content into a new directory; "HASH"
// in content is a bcrypt hash at cost 10, made once per test binary.
func usersFile(t *testing.T, content string) string {
	t.Helper()
	usersHashOnce.Do(func() {
		h, err := bcrypt.GenerateFromPassword([]byte("pw"), ui.MinUserCost)
		if err != nil {
			panic(err)
		}
		usersHash = string(h)
	})
	p := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "HASH", usersHash)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUIUsersFile: --users (or PAYOUT_UI_USERS_FILE) is read at start; a
// bad file, or one together with PAYOUT_UI_USER/PAYOUT_UI_PASSWORD, is a
// configuration error naming what is wrong before any connection is made;
// four-eyes accepts it (not with the token).
func TestUIUsersFile(t *testing.T) {
	good := usersFile(t, "# ops\nalice:HASH\nbob:HASH\n")
	noColon := usersFile(t, "alice:HASH\nbob HASH\n")
	dup := usersFile(t, "alice:HASH\nalice:HASH\n")
	empty := usersFile(t, "\n# nobody\n")
	missing := filepath.Join(t.TempDir(), "missing")
	redisURL := "redis://127.0.0.1:1/0" // unreachable: past the checks the exit is ExitInfra
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
		msg  []string // in stderr
	}{
		{"good file", []string{"--users", good}, nil, ExitInfra, nil},
		{"good file from the environment", nil, map[string]string{"PAYOUT_UI_USERS_FILE": good}, ExitInfra, nil},
		{"good file, four-eyes", []string{"--users", good, "--four-eyes"}, nil, ExitInfra, nil},
		{"good file and the token", []string{"--users", good, "--addr", "0.0.0.0:0"}, map[string]string{"PAYOUT_UI_TOKEN": "t"}, ExitInfra, nil},
		{"good file, four-eyes and the token", []string{"--users", good, "--four-eyes"}, map[string]string{"PAYOUT_UI_TOKEN": "t"}, ExitUsage,
			[]string{"--four-eyes", "PAYOUT_UI_TOKEN"}},
		{"good file and PAYOUT_UI_USER", []string{"--users", good}, map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p"}, ExitUsage,
			[]string{"--users", "PAYOUT_UI_USER/PAYOUT_UI_PASSWORD"}},
		{"line without a colon", []string{"--users", noColon}, nil, ExitUsage, []string{noColon + ":2:", "no ':'"}},
		{"duplicate from the environment", nil, map[string]string{"PAYOUT_UI_USERS_FILE": dup}, ExitUsage, []string{dup + ":2:", "also on line 1"}},
		{"no users", []string{"--users", empty}, nil, ExitUsage, []string{empty, "no users"}},
		{"missing file", []string{"--users", missing}, nil, ExitUsage, []string{missing}},
		{"no credentials", []string{"--addr", "0.0.0.0:0"}, nil, ExitUsage, []string{"--users FILE"}},
		{"trusted proxies", []string{"--users", good, "--trusted-proxies", "10.0.0.0/24,192.0.2.7"}, nil, ExitInfra, nil},
		{"trusted proxies from the environment", []string{"--users", good}, map[string]string{"PAYOUT_TRUSTED_PROXIES": "10.0.0.0/24,proxy.example"}, ExitUsage,
			[]string{"bad trusted proxy", `"proxy.example"`}},
		{"trusting everyone", []string{"--users", good, "--trusted-proxies", "0.0.0.0/0"}, nil, ExitUsage, []string{"wider than a /8"}},
		{"a trusted proxy that is a name", []string{"--users", good, "--trusted-proxies", "10.0.0.0/24,proxy.example"}, nil, ExitUsage,
			[]string{"bad trusted proxy", `"proxy.example"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runMain(t, tc.env, append([]string{"ui", "--redis", redisURL}, tc.args...)...)
			if code != tc.want {
				t.Fatalf("exit %d, want %d: %s", code, tc.want, errs)
			}
			for _, m := range tc.msg {
				if !strings.Contains(errs, m) {
					t.Errorf("stderr lacks %q: %s", m, errs)
				}
			}
			if strings.Contains(errs, usersHash[7:]) {
				t.Errorf("stderr shows the hash: %s", errs)
			}
		})
	}
}
