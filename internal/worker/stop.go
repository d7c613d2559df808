package worker

import (
	"context"
	"errors"
	"sync"
	"time"
)

// A fault of this worker's own configuration (a data key that does not
// open the card numbers it is given, PSP credentials the PSP refuses that
// no other worker confirms) stops this worker, not the fleet: it takes no
// more tasks, gives back the ones it holds untouched, and Run returns a
// *StopError. The queue stays unpaused for the workers that can work it.

// ErrStopped is matched (errors.Is) by the *StopError that Run returns
// when the worker stopped itself.
var ErrStopped = errors.New("worker stopped itself")

// StopError is why the worker stopped itself: a fault of its own
// configuration, to fix before it is started again.
type StopError struct {
	Reason string
}

func (e *StopError) Error() string        { return "worker stopped itself: " + e.Reason }
func (e *StopError) Is(target error) bool { return target == ErrStopped }

// stopper is the worker's own stop: closed once, with the first reason.
type stopper struct {
	once sync.Once
	ch   chan struct{}
	err  *StopError
}

func newStopper() *stopper { return &stopper{ch: make(chan struct{})} }

// stopping reports whether the worker stopped itself.
func (s *stopper) stopping() bool {
	select {
	case <-s.ch:
		return true
	default:
		return false
	}
}

// giveBack is the error of a handler that leaves its task as it found it
// because this worker stopped itself: Asynq runs the task again soon, on
// any worker, without counting a failure.
func giveBack(reason string) error {
	return &deferral{reason: "this worker stopped itself (" + reason + "); task given back untouched", after: time.Second}
}

// stopSelf stops this worker (once; later reasons are dropped) with one
// alert, and returns the error that gives the current task back.
func (w *Worker) stopSelf(reason string) error {
	w.stop.once.Do(func() {
		w.stop.err = &StopError{Reason: reason}
		w.log.Error().Str("alert", "worker_stopped").Str("reason", reason).
			Msg("WORKER STOPPING ITSELF: a fault of this worker's configuration; the queue and the payout are left as they were for the other workers. Fix it, then start the worker again")
		close(w.stop.ch)
	})
	return giveBack(reason)
}

// refuseWhenStopped gives back a task that arrives after the worker
// stopped itself (nil when it did not).
func (w *Worker) refuseWhenStopped() error {
	if !w.stop.stopping() {
		return nil
	}
	return giveBack(w.stop.err.Reason)
}

// stoppedRun waits for ctx to end or for the worker to stop itself; it
// returns the *StopError in the second case.
func (w *Worker) stoppedRun(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-w.stop.ch:
		return w.stop.err
	}
}
