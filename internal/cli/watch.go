package cli

import (
	"flag"
	"strings"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/worker"
)

// registerWatch declares the flags of the watch of paid payouts.
func (w *workerFlags) registerWatch(fs *flag.FlagSet, d worker.Config) {
	fs.StringVar(&w.returnedStatuses, "psp-returned-statuses", strings.Join(psp.DefaultReturnedStatuses, ","), "PSP status words that mean the money came back after it was paid (comma-separated; any case, width, hyphens or underscores; an assumption: the reference shows only Created): a watched paid payout becomes returned")
	fs.DurationVar(&w.watchWindow, "watch-window", d.Watch.Window, "how long a paid payout's order is asked about again in case the money comes back (0: paid is not watched)")
	fs.StringVar(&w.watchEvery, "watch-intervals", joinDurations(d.Watch.Intervals), "waits between the watch checks of a paid payout, comma-separated; the last repeats")
}

// watch sets the watch of paid payouts, adding the returned vocabulary to
// the one status-word classifier (c.Outcome.Words, built by outcome).
func (w *workerFlags) watch(c *worker.Config, probs *problems) {
	words, err := c.Outcome.Words.WithReturned(splitList(w.returnedStatuses))
	if err != nil {
		probs.flag("psp-returned-statuses", "--psp-returned-statuses: %v", err)
	}
	c.Outcome.Words = words
	var every []time.Duration
	for _, f := range splitList(w.watchEvery) {
		d, err := time.ParseDuration(f)
		if err != nil || d <= 0 {
			probs.flag("watch-intervals", "--watch-intervals %q: %q is not a positive duration", w.watchEvery, f)
			continue
		}
		every = append(every, d)
	}
	if len(every) == 0 && !probs.has("watch-intervals") {
		probs.flag("watch-intervals", "--watch-intervals needs at least one duration")
	}
	if w.watchWindow < 0 {
		probs.flag("watch-window", "--watch-window %s: must not be negative", w.watchWindow)
	}
	c.Watch = decide.WatchPolicy{Window: w.watchWindow, Intervals: every}
	if !w.trackOutcome {
		c.Watch.Window = 0 // nothing is paid when outcomes are not followed
	}
}
