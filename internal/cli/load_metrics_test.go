package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/loader"
)

func TestLoadTallyRecordsTheRunsResult(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		skip    bool
		want    string // a line of the textfile; "" for no file
		wantNot string
	}{
		{name: "all loaded", want: `payout_loader_last_run_rows{result="success"} 7`},
		{name: "rows refused: the files' fault", err: errRejected, want: `payout_loader_last_run_refused_files{result="success"} 1`},
		{name: "redis down", err: infraErr(errors.New("dial tcp: refused")), want: `payout_loader_last_run_files{result="failure"} 2`, wantNot: `result="success"`},
		{name: "bad flag", err: usageErr("--settle: bad"), want: `payout_loader_last_run_timestamp_seconds{result="failure"}`},
		{name: "spool locked by another run", skip: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _, stderr := testEnv(nil)
			path := filepath.Join(t.TempDir(), "payout.prom")
			tally := &loadTally{start: time.Now()}
			tally.add(loader.Result{Loaded: true, Registered: 7})
			tally.add(loader.Result{Loaded: false})
			if tt.skip {
				tally.skipped()
			}
			tally.record(e, path, tt.err)
			b, err := os.ReadFile(path)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("a textfile was written:\n%s", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, stderr)
			}
			if !strings.Contains(string(b), tt.want) {
				t.Errorf("textfile lacks %q:\n%s", tt.want, b)
			}
			if tt.wantNot != "" && strings.Contains(string(b), tt.wantNot) {
				t.Errorf("textfile has %q:\n%s", tt.wantNot, b)
			}
		})
	}
}
