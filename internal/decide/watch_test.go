package decide

import (
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

func TestWatch(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000).UTC()
	p := WatchPolicy{Window: 30 * 24 * time.Hour, Intervals: DefaultWatchIntervals}
	watched := Snapshot{State: lifecycle.Paid, Now: now, Watch: WatchState{On: true, Seq: 1, Due: now, End: now.Add(10 * 24 * time.Hour)}}
	for _, tc := range []struct {
		name string
		s    func(Snapshot) Snapshot
		a    WatchAnswer
		want WatchDecision
	}{
		{"returned", nil, WatchAnswer{Returned: true, PSPStatus: "Returned"}, WatchDecision{Action: WatchReturned}},
		{"still paid: 6h next", nil, WatchAnswer{PSPStatus: "Paid"}, WatchDecision{Action: WatchAgain, Seq: 2, Wait: 6 * time.Hour}},
		{"no answer: the same", nil, WatchAnswer{}, WatchDecision{Action: WatchAgain, Seq: 2, Wait: 6 * time.Hour}},
		{"daily after", func(s Snapshot) Snapshot { s.Watch.Seq = 5; return s }, WatchAnswer{}, WatchDecision{Action: WatchAgain, Seq: 6, Wait: 24 * time.Hour}},
		{"never past the end", func(s Snapshot) Snapshot { s.Watch.Seq = 5; s.Watch.End = now.Add(3 * time.Hour); return s },
			WatchAnswer{}, WatchDecision{Action: WatchAgain, Seq: 6, Wait: 3 * time.Hour}},
		{"window over", func(s Snapshot) Snapshot { s.Watch.End = now; return s }, WatchAnswer{PSPStatus: "Paid"}, WatchDecision{Action: WatchEnded}},
		{"returned at the end", func(s Snapshot) Snapshot { s.Watch.End = now.Add(-time.Hour); return s }, WatchAnswer{Returned: true}, WatchDecision{Action: WatchReturned}},
		{"not watched", func(s Snapshot) Snapshot { s.Watch.On = false; return s }, WatchAnswer{Returned: true}, WatchDecision{Action: WatchSkip}},
		{"not paid", func(s Snapshot) Snapshot { s.State = lifecycle.Returned; return s }, WatchAnswer{Returned: true}, WatchDecision{Action: WatchSkip}},
	} {
		s := watched
		if tc.s != nil {
			s = tc.s(s)
		}
		if got := Watch(s, tc.a, p); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestWatchIntervalsDecay(t *testing.T) {
	p := WatchPolicy{Window: time.Hour / 2}
	if got := []time.Duration{p.Interval(1), p.Interval(2), p.Interval(3), p.Interval(40)}; got[0] != time.Hour || got[1] != 6*time.Hour || got[2] != 24*time.Hour || got[3] != 24*time.Hour {
		t.Fatalf("intervals %v", got)
	}
	if p.First() != time.Hour/2 {
		t.Fatalf("first check %v: not past a window of 30m", p.First())
	}
}
