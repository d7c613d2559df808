package cli

import (
	"strings"
	"testing"

	"github.com/acme/payout/internal/testenv/fakeredis"
	"github.com/acme/payout/internal/ui"
	"github.com/rs/zerolog"
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
