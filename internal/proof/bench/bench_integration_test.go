//go:build integration

package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
)

// A whole bench run at toy sizes: builds the binaries, starts its own
// redis-server and sandboxes, and every figure comes out measured.
func TestRunSmall(t *testing.T) {
	testenv.NeedTool(t, "redis-server")
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	cfg := Config{
		Go: "go", Root: root, ResultsDir: t.TempDir(),
		LoaderRows: 300, LoaderRepeat: 2, RSSRows: 500,
		OverheadPayouts: 200, OverheadConcurrency: 10, OverheadRepeat: 2,
		LatencyPayouts: 200, LatencyConcurrency: 50, Latency: 20 * time.Millisecond,
		E2ERows: 50, APIRows: 200, APIRepeat: 1, PhaseTimeout: time.Minute, Progress: &progress,
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if len(rep.Figures) != 14 {
		t.Fatalf("%d figures, want 14", len(rep.Figures))
	}
	if lanes := rep.Figures[5]; !strings.Contains(lanes.Name, "vs a bare handler of 4 lanes") || len(lanes.BaseSamples) != cfg.OverheadRepeat {
		t.Errorf("figure 6: %q with %d bare samples, want the bare handler of 4 lanes, %d samples", lanes.Name, len(lanes.BaseSamples), cfg.OverheadRepeat)
	}
	for _, f := range rep.Figures {
		if f.Error != "" || f.Ours <= 0 {
			t.Errorf("%s: ours %v, error %q", f.Name, f.Ours, f.Error)
		}
		if f.BaselineName != "" && (f.Baseline <= 0 || f.Ratio <= 0) {
			t.Errorf("%s: baseline %v ratio %v", f.Name, f.Baseline, f.Ratio)
		}
	}
	floor := func(n string) bool {
		return strings.HasPrefix(n, "loader 300 rows: Redis floor: payout load keeps Redis busy ")
	}
	if !slices.ContainsFunc(rep.Notes, floor) {
		t.Errorf("no loader Redis floor among the notes: %q", rep.Notes)
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

// The memory measurement and its simulation at toy sizes: every phase is
// measured, archiving leaves little, the simulation archives and reports,
// and the claims of archived batches leave after the id window (archive
// after 1 day, window 2 days: from day 5 on, 3 days of them are held).
func TestMemorySmall(t *testing.T) {
	testenv.NeedTool(t, "redis-server")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := MemoryConfig{Rows: 3000, Concurrency: 20, Days: 7, RowsPerDay: 300, ArchiveAfter: 1, IDWindow: 2, RetentionDays: 1,
		FidelityRows: 2000, FastConcurrency: 64}
	rep, err := Memory(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f := rep.Fidelity; f == nil || len(f.Diffs) != 0 || f.Real <= 0 {
		t.Fatalf("fidelity check: %+v", f)
	}
	if len(rep.Phases) != 4 || len(rep.Sim) != 7 {
		t.Fatalf("%d phases, %d simulated days", len(rep.Phases), len(rep.Sim))
	}
	queued, archived := rep.Phases[0].PerPayout, rep.Phases[3].PerPayout
	// (At toy sizes the fixed costs, connections among them, weigh a lot.)
	if queued < 200 || archived <= 0 || archived > queued/2 {
		t.Fatalf("bytes a payout: queued %.0f, archived %.0f", queued, archived)
	}
	if last := rep.Sim[6]; last.Archived != 6 || last.Live != 1 || rep.SimPeak <= 0 {
		t.Fatalf("last simulated day: %+v, peak %d", last, rep.SimPeak)
	}
	for _, d := range rep.Sim {
		// Day d archives batch d-1; each archived batch's claims are held
		// till the end of the day its window ends.
		want := int64(300 * min(d.Archived, cfg.IDWindow+1))
		if d.Claims != want {
			t.Fatalf("day %d: %d archived claims held, want %d (%+v)", d.Day, d.Claims, want, rep.Sim)
		}
	}
	var out bytes.Buffer
	rep.WriteMemory(&out)
	for _, want := range []string{"| queued (after the load) |", "Fidelity check of the fast path", "passed", "peak used_memory", "sizing rule: maxmemory >="} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}

	// The real worker's path, kept for --sim-real, still simulates.
	cfg.Rows, cfg.Days, cfg.SimReal = 300, 2, true
	rep, err = Memory(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Sim) != 2 || rep.Fidelity != nil || rep.Sim[1].Archived != 1 {
		t.Fatalf("real path: %+v, fidelity %+v", rep.Sim, rep.Fidelity)
	}
}

// With deploy/redis.conf (hash-max-listpack-value 512) the queued Asynq
// task hashes are listpacks; with Redis's defaults they are hashtables.
func TestMemoryEncodingLimits(t *testing.T) {
	testenv.NeedTool(t, "redis-server")
	for _, tc := range []struct {
		name, conf, limits, enc string
		value                   int
	}{
		{"defaults", "", "hash-max-listpack-value 64,", "hashtable", 0},
		{"deploy file", "../../../deploy/redis.conf", "hash-max-listpack-value 512,", "listpack", 0},
		{"flag", "", "hash-max-listpack-value 300,", "listpack", 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := Memory(ctx, MemoryConfig{Rows: 200, Concurrency: 10, RedisConf: tc.conf, ListpackValue: tc.value, IDWindow: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(rep.Limits, tc.limits) {
				t.Errorf("limits %q, want %q", rep.Limits, tc.limits)
			}
			var task *KeyClass
			for i, k := range rep.Phases[0].Keys {
				if strings.HasPrefix(k.Class, "asynq task") {
					task = &rep.Phases[0].Keys[i]
				}
			}
			if task == nil || task.Encodings[tc.enc] == 0 || len(task.Encodings) != 1 {
				t.Fatalf("queued task hashes: %+v, want all %s", task, tc.enc)
			}
		})
	}
}
