//go:build integration

package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/testenv"
)

// A whole bench run at toy sizes: builds the binaries, starts its own
// redis-server and sandboxes, and every figure comes out measured.
func TestRunSmall(t *testing.T) {
	testenv.NeedTool(t, "redis-server")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg := Config{
		Go: "go", Root: root, ResultsDir: t.TempDir(),
		LoaderRows: 300, LoaderRepeat: 2, RSSRows: 500,
		OverheadPayouts: 200, OverheadConcurrency: 10,
		LatencyPayouts: 200, LatencyConcurrency: 50, Latency: 20 * time.Millisecond,
		E2ERows: 50, PhaseTimeout: time.Minute, Progress: &progress,
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if len(rep.Figures) != 10 {
		t.Fatalf("%d figures, want 10", len(rep.Figures))
	}
	for _, f := range rep.Figures {
		if f.Error != "" || f.Ours <= 0 {
			t.Errorf("%s: ours %v, error %q", f.Name, f.Ours, f.Error)
		}
		if f.BaselineName != "" && (f.Baseline <= 0 || f.Ratio <= 0) {
			t.Errorf("%s: baseline %v ratio %v", f.Name, f.Baseline, f.Ratio)
		}
	}
	if rep.Machine.RedisVersion == "" || rep.Machine.GoVersion == "" || rep.Machine.CPUs < 1 {
		t.Errorf("machine %+v", rep.Machine)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.WriteJSON(cfg.ResultsDir); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", table.String())

	// --only: just the named measurement, recorded in the settings.
	cfg.Only, cfg.LoaderRepeat, progress = []string{PartLoader}, 1, bytes.Buffer{}
	rep, err = Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run --only loader: %v\n%s", err, progress.String())
	}
	if len(rep.Figures) != 2 || !strings.HasPrefix(rep.Figures[0].Name, "loader, 300-row file") || rep.Settings["only"] != PartLoader {
		t.Fatalf("--only loader: settings %v, figures %+v", rep.Settings, rep.Figures)
	}
}
