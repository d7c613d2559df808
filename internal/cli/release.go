package cli

import (
	"flag"
	"time"

	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/schedule"
)

// releaseFlags hold a file's payouts until a release time (scheduled
// release: loader/release.go, package schedule), on load.
type releaseFlags struct {
	at        string
	column    string
	zone      string
	holidays  string
	weekends  bool
	tolerance time.Duration
	horizon   time.Duration
}

func (r *releaseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.at, "release-at", "", "hold the file's payouts, scheduled, until this time: a date YYYY-MM-DD (its midnight in --release-zone) or an RFC 3339 time (2026-12-24T09:00:00+03:00); empty: a control file's release=, else at once")
	r.registerRules(fs)
}

// registerRules registers the release flags but --release-at: how a
// release time and a pay date are read and checked (payout api, whose
// requests carry their own release time).
func (r *releaseFlags) registerRules(fs *flag.FlagSet) {
	fs.StringVar(&r.column, "pay-date-column", "", "the informational column that holds a row's own pay date (same forms as --release-at; it wins over the batch's release time for its row); empty: none, a payDate column stays a note")
	fs.StringVar(&r.zone, "release-zone", "UTC", "the IANA time zone a plain release date is read in (Europe/Moscow)")
	fs.StringVar(&r.holidays, "holidays", "", "a file of holidays, one date YYYY-MM-DD a line (# comments): a release on one moves to the next business day")
	fs.BoolVar(&r.weekends, "business-days", false, "a release on a Saturday or Sunday moves to the next business day (with --holidays: the next day that is neither)")
	fs.DurationVar(&r.tolerance, "release-past-tolerance", 0, "accept a release time this much before the start of today (in --release-zone); 0: a release before today is refused")
	fs.DurationVar(&r.horizon, "release-horizon", schedule.DefaultHorizon, "refuse a release time further ahead than this")
}

// options are the loader's release options, or a usage error.
func (r *releaseFlags) options() (loader.Release, error) {
	zone, err := time.LoadLocation(r.zone)
	if err != nil {
		return loader.Release{}, usageErr("--release-zone %q: %v", r.zone, err)
	}
	if r.tolerance < 0 || r.horizon <= 0 {
		return loader.Release{}, usageErr("--release-past-tolerance must not be negative and --release-horizon must be above 0")
	}
	rules := schedule.Rules{Zone: zone, Tolerance: r.tolerance, Horizon: r.horizon, Calendar: schedule.Calendar{Weekends: r.weekends}}
	if r.holidays != "" {
		if rules.Calendar.Holidays, err = schedule.ReadHolidays(r.holidays); err != nil {
			return loader.Release{}, usageErr("--holidays: %v", err)
		}
	}
	if r.at != "" {
		if _, err := rules.Parse(r.at); err != nil {
			return loader.Release{}, usageErr("--release-at: %v", err)
		}
	}
	return loader.Release{At: r.at, Rules: rules}, nil
}
