package decide

import (
	"time"

	"github.com/acme/payout/internal/lifecycle"
)

// WatchState is the watch of a paid payout, as the ledger stores it: money
// can come back weeks after it was sent, so a paid payout's order is asked
// about again for a window (WatchPolicy), at decaying intervals.
type WatchState struct {
	// On: the payout is paid and watched (its watch check Seq is due at
	// Due); false once the window ended or it was returned.
	On  bool
	Seq int       // the watch check due (1 after paid)
	Due time.Time // when it is due (Redis's clock)
	End time.Time // the window's end: the last check is due then
}

// DefaultWatchWindow is how long a paid payout is watched by default.
const DefaultWatchWindow = 30 * 24 * time.Hour

// DefaultWatchIntervals are the waits before the watch checks of a paid
// payout: 1h after paid, 6h after that, then daily.
var DefaultWatchIntervals = []time.Duration{time.Hour, 6 * time.Hour, 24 * time.Hour}

// WatchPolicy says how long and how often a paid payout is watched.
type WatchPolicy struct {
	Window    time.Duration   // 0: a paid payout is not watched
	Intervals []time.Duration // waits before check 1, 2, ...; the last repeats
}

// Interval is the wait before watch check seq (1-based).
func (p WatchPolicy) Interval(seq int) time.Duration {
	if len(p.Intervals) == 0 {
		return DefaultWatchIntervals[min(max(seq, 1), len(DefaultWatchIntervals))-1]
	}
	return p.Intervals[min(max(seq, 1), len(p.Intervals))-1]
}

// First is the wait before the first watch check, never past the window.
func (p WatchPolicy) First() time.Duration { return min(p.Interval(1), p.Window) }

// WatchAction is what recording a watch check did.
type WatchAction string

// The actions of a watch check.
const (
	WatchReturned WatchAction = "returned" // paid -> returned
	WatchAgain    WatchAction = "again"    // watch check Seq is next, due after Wait
	WatchEnded    WatchAction = "ended"    // the window is over: the watch ends, the payout stays paid
	WatchSkip     WatchAction = "skip"     // not watched (not paid, or the watch ended): nothing asked, nothing written
)

// WatchAnswer is what a watch check's status query said.
type WatchAnswer struct {
	// Returned: the PSP's status word is one of --psp-returned-statuses.
	Returned  bool
	PSPStatus string // the status word ("": no answer)
	Reason    string // the PSP's reason, scrubbed
	ChangedAt string // when the PSP says the status changed, as it wrote it
	HTTP      int
}

// WatchDecision is what recording a watch check does: decided here,
// written by the ledger's applyWatchScript only if the payout is still
// paid and awaits the same check with the same due time.
type WatchDecision struct {
	Action WatchAction
	Seq    int           // with WatchAgain: the next check
	Wait   time.Duration // with WatchAgain: from now until it is due
}

// PreWatch tells whether a watch check of s is to be asked at all: the
// payout is paid and watched. Any watch task of it asks, due or not
// (a callback moves a check to now), and the write compares the check
// read, so a redelivered or duplicated task writes nothing twice.
func (s Snapshot) PreWatch() bool { return s.State == lifecycle.Paid && s.Watch.On }

// Watch decides what the answer a makes of the watched payout s at s.Now:
//
//	not watched                 skip
//	a returned status           returned (reason and time kept)
//	else, at or past the end    ended: the payout stays paid, unwatched
//	else                        check Seq+1, due after the next interval
//	                            (never past the window's end)
func Watch(s Snapshot, a WatchAnswer, p WatchPolicy) WatchDecision {
	switch {
	case !s.PreWatch():
		return WatchDecision{Action: WatchSkip}
	case a.Returned:
		return WatchDecision{Action: WatchReturned}
	case !s.Now.Before(s.Watch.End):
		return WatchDecision{Action: WatchEnded}
	}
	next := s.Watch.Seq + 1
	wait := min(p.Interval(next), s.Watch.End.Sub(s.Now))
	return WatchDecision{Action: WatchAgain, Seq: next, Wait: wait}
}
