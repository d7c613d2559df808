// Package schedule holds back payouts until their release time: the rules
// that turn a release time or pay date as people write it into the moment
// a payout may leave (strict parsing, a zone for plain dates, business days
// with weekends and a holiday file, the window between today and the
// horizon), and the workers' releaser, which moves scheduled payouts whose
// time has come to queued by compare-and-set (ledger.Schedule) and enqueues
// their creates (package queue), whether or not any loader runs that day.
package schedule

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DateLayout is how a plain date is written: 2026-12-24.
const DateLayout = time.DateOnly

// DefaultHorizon is how far ahead a release time may be by default.
const DefaultHorizon = 90 * 24 * time.Hour

// ErrDate is matched by every refusal of a release time or pay date.
var ErrDate = errors.New("release date refused")

// Calendar says which days are business days: with Weekends, Saturday
// and Sunday are not; no day of Holidays (YYYY-MM-DD) is. The zero
// Calendar makes every day a business day.
type Calendar struct {
	Weekends bool
	Holidays map[string]bool
}

// Business reports whether day (its date, whatever its zone) is a business day.
func (c Calendar) Business(day time.Time) bool {
	if c.Weekends && (day.Weekday() == time.Saturday || day.Weekday() == time.Sunday) {
		return false
	}
	return !c.Holidays[day.Format(DateLayout)]
}

// Next is the first business day at or after day (at most a year on: a
// calendar without one is a mistake), keeping its time of day.
func (c Calendar) Next(day time.Time) (time.Time, error) {
	for i := 0; i < 366; i++ {
		if c.Business(day) {
			return day, nil
		}
		day = day.AddDate(0, 0, 1)
	}
	return day, fmt.Errorf("no business day within a year of %s: %w", day.Format(DateLayout), ErrDate)
}

// ReadHolidays reads a holiday file: one date (YYYY-MM-DD) a line, blank
// lines and # comments (whole line or after the date) allowed. A line that
// is not a date refuses the file, naming the file and line.
func ReadHolidays(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("holiday file: %w", err)
	}
	defer f.Close()
	return ParseHolidays(filepath.Base(path), f)
}

// ParseHolidays reads a holiday file named name (for messages) from r.
func ParseHolidays(name string, r io.Reader) (map[string]bool, error) {
	days := map[string]bool{}
	sc := bufio.NewScanner(r)
	var errs []error
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(strings.TrimPrefix(text, "\uFEFF"))
		if text == "" {
			continue
		}
		d, err := time.Parse(DateLayout, text)
		if err != nil || d.Format(DateLayout) != text {
			errs = append(errs, fmt.Errorf("%s:%d: %q is not a date YYYY-MM-DD: %w", name, line, text, ErrDate))
			continue
		}
		days[text] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("holiday file %s: %w", name, err)
	}
	return days, errors.Join(errs...)
}

// Rules turn what people write into a release time and check it.
type Rules struct {
	// Zone is where a plain date is read: 2026-12-24 is its midnight
	// there. nil: UTC.
	Zone *time.Location
	// Calendar moves a release on a day that is no business day to the
	// start of the next business day (in Zone).
	Calendar Calendar
	// Tolerance lets a release time be this much before the start of
	// today (in Zone); 0: nothing before today.
	Tolerance time.Duration
	// Horizon: a release time further ahead than this is refused;
	// 0: DefaultHorizon.
	Horizon time.Duration
}

func (r Rules) zone() *time.Location {
	if r.Zone == nil {
		return time.UTC
	}
	return r.Zone
}

// Parse reads a release time written as RFC 3339 (2026-12-24T09:00:00+03:00)
// or as a plain date (2026-12-24: its midnight in Zone), strictly: nothing
// else, no surrounding text; then moves it to the next business day
// (Calendar). It does not check the window (Check).
func (r Rules) Parse(s string) (time.Time, error) {
	t, plain, err := r.parse(s)
	if err != nil {
		return t, err
	}
	day := t.In(r.zone())
	next, err := r.Calendar.Next(day)
	if err != nil {
		return t, err
	}
	if !next.Equal(day) && !plain {
		// a time on a day off leaves at the start of the next business day
		next = time.Date(next.Year(), next.Month(), next.Day(), 0, 0, 0, 0, r.zone())
	}
	return next, nil
}

func (r Rules) parse(s string) (time.Time, bool, error) {
	if s == "" || strings.TrimSpace(s) != s {
		return time.Time{}, false, fmt.Errorf("%q is not a date (YYYY-MM-DD) or an RFC 3339 time (YYYY-MM-DDTHH:MM:SSZ or +HH:MM): %w", s, ErrDate)
	}
	if d, err := time.ParseInLocation(DateLayout, s, r.zone()); err == nil && d.Format(DateLayout) == s {
		return d, true, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil && strings.ContainsRune(s, 'T') {
		return t, false, nil
	}
	return time.Time{}, false, fmt.Errorf("%q is not a date (YYYY-MM-DD) or an RFC 3339 time (YYYY-MM-DDTHH:MM:SSZ or +HH:MM): %w", s, ErrDate)
}

// Check refuses a release time t before today (in Zone, less Tolerance)
// or beyond the horizon from now.
func (r Rules) Check(t, now time.Time) error {
	local := now.In(r.zone())
	today := time.Date(local.Year(), local.Month(), local.Day(), 0, 0, 0, 0, r.zone())
	horizon := r.Horizon
	if horizon == 0 {
		horizon = DefaultHorizon
	}
	switch {
	case t.Before(today.Add(-r.Tolerance)):
		return fmt.Errorf("release %s is in the past (today is %s in %s): %w", t.In(r.zone()).Format(time.RFC3339), today.Format(DateLayout), r.zone(), ErrDate)
	case t.After(now.Add(horizon)):
		return fmt.Errorf("release %s is beyond the horizon of %s (latest %s): %w", t.In(r.zone()).Format(time.RFC3339), days(horizon), now.Add(horizon).In(r.zone()).Format(time.RFC3339), ErrDate)
	}
	return nil
}

// Resolve is Parse, then Check against now.
func (r Rules) Resolve(s string, now time.Time) (time.Time, error) {
	t, err := r.Parse(s)
	if err != nil {
		return t, err
	}
	return t, r.Check(t, now)
}

// days writes a horizon in days when it is whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}
