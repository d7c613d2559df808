package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv/golden"
)

func TestEvaluate(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name      string
		f         Figure
		wantRatio float64
		wantMet   *bool
	}{
		{"ratio met", Figure{Ours: 80, Baseline: 100, Target: Target{RatioAtLeast, 0.75}}, 0.8, &yes},
		{"ratio missed", Figure{Ours: 70, Baseline: 100, Target: Target{RatioAtLeast, 0.75}}, 0.7, &no},
		{"ratio exactly at target", Figure{Ours: 3, Baseline: 4, Target: Target{RatioAtLeast, 0.75}}, 0.75, &yes},
		{"no baseline never meets a ratio", Figure{Ours: 70, Target: Target{RatioAtLeast, 0.75}}, 0, &no},
		{"at most met", Figure{Ours: 40, Target: Target{AtMost, 64}}, 0, &yes},
		{"at most missed", Figure{Ours: 65, Target: Target{AtMost, 64}}, 0, &no},
		{"unmeasured never meets at most", Figure{Target: Target{AtMost, 64}}, 0, &no},
		{"error is never met", Figure{Ours: 90, Baseline: 100, Target: Target{RatioAtLeast, 0.75}, Error: "boom"}, 0.9, &no},
		{"ratio at most", Figure{Ours: 90, Baseline: 100, Target: Target{RatioAtMost, 0.95}}, 0.9, &yes},
		{"reported has no verdict", Figure{Ours: 12, Target: Target{Kind: Reported}}, 0, nil},
		// Pairs: ratios 0.5, 0.9, 0.8; the median pair ratio (0.8) rules, not
		// median(ours)/median(baseline) = 80/100.
		{"paired samples use the median pair ratio", Figure{Ours: 80, Baseline: 100,
			OursSamples: []float64{50, 90, 80}, BaseSamples: []float64{100, 100, 100}, Target: Target{RatioAtLeast, 0.75}}, 0.8, &yes},
		{"pairs where medians mislead", Figure{Ours: 60, Baseline: 100,
			OursSamples: []float64{60, 60, 95}, BaseSamples: []float64{60, 100, 100}, Target: Target{RatioAtLeast, 0.75}}, 0.95, &yes},
		{"info has a ratio but no verdict", Figure{Ours: 1, Baseline: 2, Target: Target{Kind: Informative}}, 0.5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.Evaluate()
			if f.Ratio != tc.wantRatio {
				t.Errorf("ratio %v, want %v", f.Ratio, tc.wantRatio)
			}
			switch {
			case tc.wantMet == nil && f.Met != nil:
				t.Errorf("met %v, want none", *f.Met)
			case tc.wantMet != nil && (f.Met == nil || *f.Met != *tc.wantMet):
				t.Errorf("met %v, want %v", f.Met, *tc.wantMet)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	r := Report{Figures: []Figure{
		{Ours: 80, Baseline: 100, Target: Target{RatioAtLeast, 0.75}},
		{Ours: 12, Target: Target{Kind: Reported}},
	}}
	for i := range r.Figures {
		r.Figures[i].Evaluate()
	}
	r.Summarize()
	if !r.AllTarget {
		t.Fatal("all targets met, Summarize says not")
	}
	r.Figures = append(r.Figures, Figure{Ours: 200, Target: Target{AtMost, 128}})
	r.Figures[2].Evaluate()
	r.Summarize()
	if r.AllTarget {
		t.Fatal("a target is missed, Summarize says all met")
	}
}

func sampleReport() *Report {
	r := &Report{
		Started:  time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC),
		ElapsedS: 312.4,
		Machine: Machine{CPUs: 2, CPUModel: "AMD EPYC", GoVersion: "go1.26.8", RedisVersion: "7.0.15", OS: "linux/amd64",
			LoadAvgStart: "0.10 0.20 0.30", LoadAvgEnd: "1.90 1.50 0.90"},
		Figures: []Figure{
			{Name: "loader, 100,000-row file (median of 3)", Unit: "rows/s", Ours: 15234.4, Baseline: 20011, BaselineName: "(bare enqueue)", Target: Target{RatioAtLeast, 0.75}},
			{Name: "loader peak RSS, 1,000,000-row file", Unit: "MiB", Ours: 41.25, Target: Target{AtMost, 64}},
			{Name: "worker peak RSS, c=200", Unit: "MiB", Ours: 140, Target: Target{AtMost, 128}},
			{Name: "worker, PSP latency 0", Unit: "payouts/s", Ours: 1000, Baseline: 2500, BaselineName: "(bare handler)", OursRedisUS: 121.4, BaseRedisUS: 46, Target: Target{RatioAtLeast, 0.6}, Error: "bench: 3 of 20000 payouts still open"},
			{Name: "payout run --sandbox, 10,000 rows (wall)", Unit: "s", Ours: 61.27, Target: Target{Kind: Reported}},
		},
		Notes: []string{"loader: CPU ours 6.7 s vs bare 3.4 s"},
	}
	for i := range r.Figures {
		r.Figures[i].Evaluate()
	}
	r.Summarize()
	return r
}

func TestWriteTableGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "table.golden"), buf.Bytes())
}

func TestWriteJSONNamesTheFileByStart(t *testing.T) {
	dir := t.TempDir()
	path, err := sampleReport().WriteJSON(filepath.Join(dir, "results"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "results", "2026-11-23T07-00-00Z.json"); path != want {
		t.Fatalf("path %s, want %s", path, want)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte(`"allTargetsMet": false`)) || !bytes.Contains(b, []byte(`"ratio": 0.761`)) {
		t.Fatalf("JSON %s: %v", b, err)
	}
}

func TestThousands(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestCPUModelAndInfoField(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n"
	if got := CPUModel(cpuinfo); got != "AMD EPYC 7B13" {
		t.Errorf("CPUModel = %q", got)
	}
	if got := CPUModel("processor : 0\n"); got != "unknown CPU" {
		t.Errorf("CPUModel without a model = %q", got)
	}
	info := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n"
	if got := infoField(info, "redis_version"); got != "7.0.15" {
		t.Errorf("infoField = %q", got)
	}
	if got := infoField(info, "redis"); got != "" {
		t.Errorf("infoField of a prefix = %q, want empty", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=1000,usec=30000,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_lpush:calls=3,usec=6,usec_per_call=2.00\r\n" +
		"cmdstat_flushall:calls=1,usec=800000,usec_per_call=800000.00\r\n"
	st := CommandStats(info)
	if len(st) != 4 || st[1] != (CommandStat{"evalsha", 1000, 30000}) || st[2].Name != "get" {
		t.Fatalf("CommandStats = %+v", st)
	}
	if got, want := FormatStats(st, 2), "evalsha 1,000 x 30.0 us, get 10 x 5.0 us"; got != want {
		t.Errorf("FormatStats = %q, want %q", got, want)
	}
}

func TestRedisFloorNote(t *testing.T) {
	for _, tc := range []struct {
		name                string
		redis, wall, target float64
		want                string
	}{
		// 2026-11-28 23:12 on the Xeon: 1.59 s of Redis CPU against 1.26 s / 0.85.
		{"beyond the budget", 1.59, 1.26, 0.85,
			"loader 100,000 rows: Redis floor: payout load keeps Redis busy 1.59 s (15.9 us/row; one thread: no arrangement of its stages finishes sooner); the target leaves it 1.48 s (bare enqueue 1.26 s / 0.85): out of reach of its present Redis work"},
		{"under the budget", 1.00, 1.26, 0.85,
			"loader 100,000 rows: Redis floor: payout load keeps Redis busy 1.00 s (10.0 us/row; one thread: no arrangement of its stages finishes sooner); the target leaves it 1.48 s (bare enqueue 1.26 s / 0.85): within reach of its present Redis work"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redisFloorNote(100000, tc.redis, tc.wall, tc.target); got != tc.want {
				t.Errorf("redisFloorNote =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestWatchSchedule: the default watch checks a payout never returned
// after 1h, 7h, 31h, then every 24h to 703h, and once more at the
// window's end (720h): 32 checks.
func TestWatchSchedule(t *testing.T) {
	n, window := WatchSchedule()
	if n != 32 || window != 30*24*time.Hour {
		t.Fatalf("%d checks in %s, want 32 in 720h", n, window)
	}
}
