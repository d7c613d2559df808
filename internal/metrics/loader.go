package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The loader runs from cron and exits: nothing scrapes it. Its last runs
// are written for node_exporter's textfile collector (--collector.textfile.directory),
// which re-exports the file at every scrape. Written with
// prometheus.WriteToTextfile: a temporary file in the same folder, renamed
// over the old one, so a scrape never reads half a file.

// LoaderRun is one run of payout load.
type LoaderRun struct {
	// OK: the run did its job (files may have been refused: that is the
	// files' fault, counted in Refused); false: it stopped on a
	// configuration, Redis or file-system fault (exit 2 or 3).
	OK       bool
	Finished time.Time
	Duration time.Duration
	Files    int // files taken: loaded, refused or found duplicate
	Refused  int // of which refused (rows in error, control totals)
	Rows     int // rows registered by this run
}

// Loader series; the label result is "success" or "failure", and each
// keeps the figures of the last run with that result.
const (
	LoaderTimestamp = "payout_loader_last_run_timestamp_seconds"
	LoaderDuration  = "payout_loader_last_run_duration_seconds"
	LoaderFiles     = "payout_loader_last_run_files"
	LoaderRefused   = "payout_loader_last_run_refused_files"
	LoaderRows      = "payout_loader_last_run_rows"
)

var loaderHelp = map[string]string{
	LoaderTimestamp: "When the last loader run with this result ended (Unix seconds).",
	LoaderDuration:  "How long the last loader run with this result took.",
	LoaderFiles:     "Files the last loader run with this result took (loaded, refused or duplicate).",
	LoaderRefused:   "Files the last loader run with this result refused.",
	LoaderRows:      "Rows the last loader run with this result registered.",
}

func result(ok bool) string {
	if ok {
		return "success"
	}
	return "failure"
}

// WriteLoaderRun records r in the textfile at path, keeping the figures of
// the last run with the other result that the file holds.
func WriteLoaderRun(path string, r LoaderRun) error {
	vecs := map[string]*prometheus.GaugeVec{}
	reg := prometheus.NewRegistry()
	for _, name := range []string{LoaderTimestamp, LoaderDuration, LoaderFiles, LoaderRefused, LoaderRows} {
		vecs[name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: loaderHelp[name]}, []string{"result"})
		reg.MustRegister(vecs[name])
	}
	other := result(!r.OK)
	if err := keepOther(path, other, vecs); err != nil {
		return err
	}
	res := result(r.OK)
	vecs[LoaderTimestamp].WithLabelValues(res).Set(float64(r.Finished.UnixMilli()) / 1000)
	vecs[LoaderDuration].WithLabelValues(res).Set(r.Duration.Seconds())
	vecs[LoaderFiles].WithLabelValues(res).Set(float64(r.Files))
	vecs[LoaderRefused].WithLabelValues(res).Set(float64(r.Refused))
	vecs[LoaderRows].WithLabelValues(res).Set(float64(r.Rows))
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("metrics: write %s: %w", path, err)
	}
	// WriteToTextfile's temporary file is 0600; node_exporter runs as
	// another user.
	if err := os.Chmod(path, 0o644); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// keepOther copies the series labelled result=other from the file at path
// into vecs. A missing file holds nothing; an unreadable one is an error
// (rewriting it would lose the other result's figures silently).
func keepOther(path, other string, vecs map[string]*prometheus.GaugeVec) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		return fmt.Errorf("metrics: read %s: %w", path, err)
	}
	for name, fam := range fams {
		v, ok := vecs[name]
		if !ok {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == other && m.GetGauge() != nil {
					v.WithLabelValues(other).Set(m.GetGauge().GetValue())
				}
			}
		}
	}
	return nil
}
