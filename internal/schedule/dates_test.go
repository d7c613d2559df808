package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestParse pins what a release time may be written as, and what it
// becomes under a zone and a calendar.
func TestParse(t *testing.T) {
	msk, err := time.LoadLocation("Europe/Moscow")
	if err != nil {
		t.Fatal(err)
	}
	cal := Calendar{Weekends: true, Holidays: map[string]bool{"2026-12-31": true, "2027-01-01": true}}
	for _, c := range []struct {
		in    string
		rules Rules
		want  string // RFC 3339 in UTC; "" refused
	}{
		{"2026-12-24", Rules{}, "2026-12-24T00:00:00Z"},
		{"2026-12-24", Rules{Zone: msk}, "2026-12-23T21:00:00Z"},
		{"2026-12-24T09:00:00+03:00", Rules{}, "2026-12-24T06:00:00Z"},
		{"2026-12-24T09:00:00Z", Rules{Zone: msk}, "2026-12-24T09:00:00Z"},
		{"2026-12-24T09:00:00.5Z", Rules{}, "2026-12-24T09:00:00Z"},
		// business days: a Saturday date moves to Monday's midnight
		{"2026-12-26", Rules{Calendar: cal}, "2026-12-28T00:00:00Z"},
		// a holiday, then a holiday, then a weekend: Monday the 4th
		{"2026-12-31", Rules{Calendar: cal}, "2027-01-04T00:00:00Z"},
		// a time on a day off leaves at the start of the next business day
		{"2026-12-26T15:00:00Z", Rules{Calendar: cal}, "2026-12-28T00:00:00Z"},
		{"2026-12-26", Rules{Calendar: Calendar{Holidays: map[string]bool{"2026-12-26": true}}}, "2026-12-27T00:00:00Z"},
		// refused: anything not strictly one of the two forms
		{"", Rules{}, ""},
		{" 2026-12-24", Rules{}, ""},
		{"2026-12-24 ", Rules{}, ""},
		{"24.12.2026", Rules{}, ""},
		{"12/24/2026", Rules{}, ""},
		{"2026-12-32", Rules{}, ""},
		{"2026-02-30", Rules{}, ""},
		{"2026-1-5", Rules{}, ""},
		{"2026-12-24T09:00:00", Rules{}, ""},
		{"2026-12-24 09:00:00Z", Rules{}, ""},
		{"tomorrow", Rules{}, ""},
		{"46346", Rules{}, ""},
	} {
		got, err := c.rules.Parse(c.in)
		switch {
		case c.want == "" && err == nil:
			t.Errorf("Parse(%q) = %s, want refused", c.in, got)
		case c.want == "" && !errors.Is(err, ErrDate):
			t.Errorf("Parse(%q): %v, want ErrDate", c.in, err)
		case c.want != "" && err != nil:
			t.Errorf("Parse(%q): %v, want %s", c.in, err, c.want)
		case c.want != "" && got.UTC().Format(time.RFC3339) != c.want:
			t.Errorf("Parse(%q) = %s, want %s", c.in, got.UTC().Format(time.RFC3339), c.want)
		}
	}
}

// TestCheck pins the window: not before today (less the tolerance), not
// beyond the horizon.
func TestCheck(t *testing.T) {
	now := time.Date(2026, 12, 2, 15, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		at    string
		rules Rules
		ok    bool
		words string
	}{
		{"2026-12-02", Rules{}, true, ""}, // today: released at once
		{"2026-12-02T01:00:00Z", Rules{}, true, ""},
		{"2026-12-01", Rules{}, false, "in the past"},
		{"2026-12-01T23:59:59Z", Rules{}, false, "in the past"},
		{"2026-12-01", Rules{Tolerance: 24 * time.Hour}, true, ""},
		{"2027-03-02", Rules{}, true, ""},
		{"2027-03-03", Rules{}, false, "beyond the horizon of 90 days"},
		{"2026-12-10", Rules{Horizon: 7 * 24 * time.Hour}, false, "beyond the horizon of 7 days"},
	} {
		at, err := c.rules.Parse(c.at)
		if err != nil {
			t.Fatal(err)
		}
		err = c.rules.Check(at, now)
		if (err == nil) != c.ok || err != nil && !strings.Contains(err.Error(), c.words) {
			t.Errorf("Check(%s): %v, want ok %v (%q)", c.at, err, c.ok, c.words)
		}
	}
}

// TestParseHolidays: one date a line, comments and blank lines; a bad line
// is named by file and line.
func TestParseHolidays(t *testing.T) {
	days, err := ParseHolidays("h.txt", strings.NewReader("\uFEFF# 2027\n2027-01-01  # New Year\n\n2027-01-07\n"))
	if err != nil || len(days) != 2 || !days["2027-01-01"] || !days["2027-01-07"] {
		t.Fatalf("ParseHolidays = %v, %v", days, err)
	}
	_, err = ParseHolidays("h.txt", strings.NewReader("2027-01-01\n7 January\n2027-13-01\n"))
	if err == nil || !strings.Contains(err.Error(), "h.txt:2: \"7 January\"") || !strings.Contains(err.Error(), "h.txt:3:") {
		t.Fatalf("ParseHolidays of bad lines: %v", err)
	}
}

// TestCalendarWithoutBusinessDays refuses a calendar with no business day
// in a year rather than looping.
func TestCalendarWithoutBusinessDays(t *testing.T) {
	all := map[string]bool{}
	for d := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2028; d = d.AddDate(0, 0, 1) {
		all[d.Format(DateLayout)] = true
	}
	if _, err := (Rules{Calendar: Calendar{Holidays: all}}).Parse("2026-06-01"); !errors.Is(err, ErrDate) {
		t.Fatalf("Parse under a calendar of holidays only: %v", err)
	}
}
