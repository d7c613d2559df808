package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Target is what a figure must reach.
type Target struct {
	Kind  TargetKind `json:"kind"`
	Value float64    `json:"value"`
}

// TargetKind says which number of a figure the target is about.
type TargetKind string

// Kinds of target.
const (
	RatioAtLeast TargetKind = "ratio>="  // ours / baseline >= Value
	RatioAtMost  TargetKind = "ratio<="  // ours / baseline <= Value
	AtMost       TargetKind = "value<="  // ours <= Value
	Reported     TargetKind = "reported" // no target: the figure is reported
	Informative  TargetKind = "info"     // context for another figure
)

func (t Target) String() string {
	switch t.Kind {
	case RatioAtLeast:
		return ">= " + trimFloat(t.Value)
	case RatioAtMost:
		return "<= " + trimFloat(t.Value)
	case AtMost:
		return "<= " + trimFloat(t.Value) // the unit is the figure's
	case Reported:
		return "reported"
	}
	return "-"
}

// Figure is one line of the table.
type Figure struct {
	Name         string    `json:"name"`
	Unit         string    `json:"unit"`
	Ours         float64   `json:"ours"`
	OursSamples  []float64 `json:"oursSamples,omitempty"`
	OursCPU      float64   `json:"oursCpuSeconds,omitempty"` // user+system seconds of the measured process
	Baseline     float64   `json:"baseline,omitempty"`
	BaselineName string    `json:"baselineName,omitempty"`
	BaseSamples  []float64 `json:"baselineSamples,omitempty"`
	BaseCPU      float64   `json:"baselineCpuSeconds,omitempty"`
	// OursRedisUS and BaseRedisUS are the Redis server's CPU microseconds
	// per item (payout) while ours and the baseline ran: the table shows
	// them beside the figures, as they do not depend on the load of the
	// machine as much as the rates do.
	OursRedisUS float64 `json:"oursRedisUsPerItem,omitempty"`
	BaseRedisUS float64 `json:"baselineRedisUsPerItem,omitempty"`
	Ratio       float64 `json:"ratio,omitempty"`
	Target      Target  `json:"target"`
	Met         *bool   `json:"met,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Evaluate fills Ratio and Met from Ours, Baseline and Target. A figure
// measured in pairs (OursSamples[i] and BaseSamples[i] back to back, the
// order alternating) gets the median of its per-pair ratios: this
// machine's speed drifts between pairs far more than within one.
func (f *Figure) Evaluate() {
	switch {
	case len(f.OursSamples) > 1 && len(f.OursSamples) == len(f.BaseSamples):
		ratios := make([]float64, len(f.OursSamples))
		for i := range ratios {
			if f.BaseSamples[i] > 0 {
				ratios[i] = f.OursSamples[i] / f.BaseSamples[i]
			}
		}
		f.Ratio = median(ratios)
	case f.Baseline > 0:
		f.Ratio = f.Ours / f.Baseline
	}
	var met bool
	switch f.Target.Kind {
	case RatioAtLeast:
		met = f.Baseline > 0 && f.Ratio >= f.Target.Value
	case RatioAtMost:
		met = f.Baseline > 0 && f.Ratio <= f.Target.Value
	case AtMost:
		met = f.Ours > 0 && f.Ours <= f.Target.Value
	default:
		f.Met = nil
		return
	}
	if f.Error != "" {
		met = false
	}
	f.Met = &met
}

// Machine is what the figures were measured on.
type Machine struct {
	CPUs         int    `json:"nproc"`
	CPUModel     string `json:"cpuModel"`
	GoVersion    string `json:"goVersion"`
	RedisVersion string `json:"redisVersion"`
	OS           string `json:"os"`
	// LoadAvg is /proc/loadavg at the start and at the end of the run:
	// anything else running on the machine skews every figure.
	LoadAvgStart string `json:"loadAvgStart"`
	LoadAvgEnd   string `json:"loadAvgEnd"`
}

// LoadAvg returns the first three fields of /proc/loadavg, or "".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Report is the result of one bench run.
type Report struct {
	Started   time.Time         `json:"started"`
	ElapsedS  float64           `json:"elapsedSeconds"`
	Machine   Machine           `json:"machine"`
	Settings  map[string]string `json:"settings"`
	Figures   []Figure          `json:"figures"`
	Notes     []string          `json:"notes,omitempty"`
	AllTarget bool              `json:"allTargetsMet"`
}

// Summarize sets AllTarget.
func (r *Report) Summarize() {
	r.AllTarget = true
	for _, f := range r.Figures {
		if f.Met != nil && !*f.Met {
			r.AllTarget = false
		}
	}
}

// WriteTable prints the report as one aligned table with the machine above
// it and the notes below.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriter(w)
	m := r.Machine
	fmt.Fprintf(bw, "payout bench, %s\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(bw, "machine: nproc %d, %s, %s, Redis %s, %s; load average %s at start, %s at end\n\n",
		m.CPUs, m.CPUModel, m.GoVersion, m.RedisVersion, m.OS, m.LoadAvgStart, m.LoadAvgEnd)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tours\tbaseline\tratio\ttarget\tmet")
	for _, f := range r.Figures {
		base, ratio := "-", "-"
		if f.Baseline > 0 {
			base = formatValue(f.Baseline, f.Unit) + " " + f.BaselineName + redisUS(f.BaseRedisUS)
			ratio = strconv.FormatFloat(f.Ratio, 'f', 2, 64)
		}
		met := "-"
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.Met]
		}
		ours := formatValue(f.Ours, f.Unit) + redisUS(f.OursRedisUS)
		if f.Error != "" {
			ours = "FAILED " + ours
		}
		target := f.Target.String()
		if f.Target.Kind == AtMost {
			target += " " + f.Unit
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, ours, base, ratio, target, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "all targets met"
	if !r.AllTarget {
		verdict = "some targets NOT met"
	}
	fmt.Fprintf(bw, "\nratio: ours/baseline; for a median of pairs, the median of the per-pair ratios.\n")
	fmt.Fprintf(bw, "%s; bench took %s\n", verdict, (time.Duration(r.ElapsedS * float64(time.Second))).Round(time.Second))
	for _, f := range r.Figures {
		if f.Error != "" {
			fmt.Fprintf(bw, "error in %q: %s\n", f.Name, f.Error)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(bw, "- %s\n", n)
	}
	return bw.Flush()
}

// WriteJSON writes the report to dir/<started>.json and returns the path.
func (r *Report) WriteJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("bench: results directory: %w", err)
	}
	path := filepath.Join(dir, r.Started.UTC().Format("2006-01-02T15-04-05Z")+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("bench: write results: %w", err)
	}
	return path, nil
}

// redisUS is the Redis CPU per item of a table cell ("" when unmeasured).
func redisUS(us float64) string {
	if us <= 0 {
		return ""
	}
	return ", Redis " + thousands(int64(us+0.5)) + " us"
}

// formatValue prints v with its unit: thousands separated for rates, one
// decimal for MiB (peak RSS; "MB" in results written before 2026-11-25 is
// the same binary unit) and seconds.
func formatValue(v float64, unit string) string {
	switch unit {
	case "MB", "MiB":
		return strconv.FormatFloat(v, 'f', 1, 64) + " " + unit
	case "s":
		return strconv.FormatFloat(v, 'f', 1, 64) + " s"
	}
	return thousands(int64(v+0.5)) + " " + unit
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// CPUModel returns the first "model name" of a /proc/cpuinfo text.
func CPUModel(cpuinfo string) string {
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
