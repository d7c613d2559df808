// Package queue is the one owner of Asynq in payout: the only code that
// holds an Asynq client or inspector or reads Asynq's keys in Redis. The
// ledger is the truth about every payout; a task only reminds a worker of
// the payout's next step. NextStep is the one map from a ledger state to
// that task; the worker, the reconciler, the loader and the operator's
// commands ask it and hand the step to a Queue:
//
//   - Add enqueues a step once (a task already holding its ID counts as
//     done): the loader's first create of a payout, a verification.
//   - Remind makes sure a live task holds the step's ID, replacing a
//     completed or archived one; RemindBatch does it for many.
//   - RunNow moves a waiting check to now (a PSP callback).
//   - Pause, Resume and Paused stop and start all traffic toward the PSP.
//   - Liveness and RemoveOrphan judge tasks by where they sit in Asynq's
//     keys, for the reconciler (live.go).
//
// Package jobs keeps the contract (task types, queue name, payloads, task
// IDs, pure constructors); this package turns its tasks into Asynq's.
package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	asynqmetrics "github.com/hibiken/asynq/x/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Queue enqueues and inspects the payout tasks of one Redis.
type Queue struct {
	rdb    redis.UniversalClient
	client *asynq.Client
	insp   *asynq.Inspector
	now    func() time.Time
}

// Option configures a Queue.
type Option func(*Queue)

// WithClock replaces the machine's clock that a delayed task is scheduled
// by (jobs.NotBefore). Decisions in the ledger use Redis's clock, so a
// wrong clock may only move when a task runs: the chaos suite runs one
// worker with a clock off this way to show it does no harm.
func WithClock(now func() time.Time) Option { return func(q *Queue) { q.now = now } }

// New returns a Queue on rdb.
func New(rdb redis.UniversalClient, opts ...Option) *Queue {
	q := &Queue{
		rdb:    rdb,
		client: asynq.NewClientFromRedisClient(rdb),
		insp:   asynq.NewInspectorFromRedisClient(rdb),
		now:    time.Now,
	}
	for _, o := range opts {
		o(q)
	}
	return q
}

// asynqTask is s's task as Asynq keeps it, in jobs.Queue, with the
// contract's retry count and retention; a status or outcome check is
// scheduled no sooner than s.After from now (jobs.NotBefore).
func (q *Queue) asynqTask(s Step) (*asynq.Task, error) {
	t, err := s.task()
	if err != nil {
		return nil, err
	}
	return Asynq(t, q.now()), nil
}

// Asynq is the Asynq task of t, enqueued at now: in jobs.Queue, with the
// contract's task ID, retry count and retention, and a status or outcome
// check scheduled no sooner than t.Delay after now.
func Asynq(t jobs.Task, now time.Time) *asynq.Task {
	retention := jobs.Retention
	if t.Type == jobs.TypeWithdrawalWatch {
		// A watch check is no reminder once done: the ledger's watch zset
		// says when the next is due, under another ID. Not keeping it saves
		// about 550 bytes a watched payout a day.
		retention = 0
	}
	opts := []asynq.Option{asynq.TaskID(t.ID), asynq.Queue(jobs.Queue), asynq.MaxRetry(jobs.MaxRetry), asynq.Retention(retention)}
	if t.Type == jobs.TypeWithdrawalStatus || t.Type == jobs.TypeWithdrawalOutcome {
		opts = append(opts, asynq.ProcessAt(jobs.NotBefore(now, t.Delay)))
	}
	return asynq.NewTask(t.Type, t.Payload, opts...)
}

// Add enqueues s unless a task holds its ID already, in any state. It is
// for a first enqueue (the loader's create of a payout it registered, a
// verification a callback asks for), where any task with the ID means the
// step was handed to the workers; a caller that restores a missing step
// uses Remind. It reports whether the task was new.
func (q *Queue) Add(ctx context.Context, s Step) (bool, error) {
	t, err := q.asynqTask(s)
	if err != nil {
		return false, err
	}
	if _, err := q.client.EnqueueContext(ctx, t); err != nil {
		if errors.Is(err, asynq.ErrTaskIDConflict) {
			return false, nil
		}
		return false, fmt.Errorf("queue: enqueue %s: %w", t.Type(), err)
	}
	return true, nil
}

// Reminded tells what Remind found.
type Reminded int

// What Remind did.
const (
	RemindedNew      Reminded = iota + 1 // no task had the ID: enqueued
	RemindedLive                         // a live task (pending, scheduled, retry, active) has the ID: nothing to do
	RemindedReplaced                     // a completed or archived task held the ID: deleted and enqueued again
)

func (r Reminded) String() string {
	switch r {
	case RemindedNew:
		return "new"
	case RemindedLive:
		return "live"
	case RemindedReplaced:
		return "replaced"
	}
	return "unknown"
}

// Remind makes sure a live task holds s's ID. A task that is completed
// (its handler returned early, e.g. after a lost Redis reply) or archived
// (an operator archived it in the web UI) is no reminder any more: it is
// deleted and s enqueued in its place. Callers remind only of a step the
// ledger says is due (NextStep); the ledger, not the task, decides what
// the handler then does, so a step reminded of twice does no harm. An
// InFlight step is refused: its payout must move first.
func (q *Queue) Remind(ctx context.Context, s Step) (Reminded, error) {
	if s.InFlight {
		return 0, fmt.Errorf("queue: %s is in flight: the ledger moves its payout before a task follows", s.ID())
	}
	t, err := q.asynqTask(s)
	if err != nil {
		return 0, err
	}
	id := s.ID()
	replaced := false
	for try := 0; try < 3; try++ {
		_, err := q.client.EnqueueContext(ctx, t)
		if err == nil {
			if replaced {
				return RemindedReplaced, nil
			}
			return RemindedNew, nil
		}
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			return 0, fmt.Errorf("queue: enqueue %s: %w", t.Type(), err)
		}
		info, err := q.insp.GetTaskInfo(jobs.Queue, id)
		if errors.Is(err, asynq.ErrTaskNotFound) {
			continue // gone between the two calls: enqueue again
		}
		if err != nil {
			return 0, fmt.Errorf("queue: look up task %s: %w", id, err)
		}
		if info.State != asynq.TaskStateCompleted && info.State != asynq.TaskStateArchived {
			return RemindedLive, nil
		}
		if err := q.insp.DeleteTask(jobs.Queue, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			return 0, fmt.Errorf("queue: delete %s task %s: %w", info.State, id, err)
		}
		replaced = true
	}
	return 0, fmt.Errorf("queue: task %s kept changing while it was restored", id)
}

// RemindBatch reminds of every step, in order, and reports how many tasks
// it enqueued (new or replaced). It stops at the first error.
func (q *Queue) RemindBatch(ctx context.Context, steps []Step) (int, error) {
	n := 0
	for _, s := range steps {
		r, err := q.Remind(ctx, s)
		if err != nil {
			return n, err
		}
		if r != RemindedLive {
			n++
		}
	}
	return n, nil
}

// RunNow moves the task id, if it waits (scheduled or retry), to now, and
// reports whether it did. A missing task is no error: the reconciler
// restores it.
func (q *Queue) RunNow(ctx context.Context, id string) (bool, error) {
	info, err := q.insp.GetTaskInfo(jobs.Queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("queue: look up task %s: %w", id, err)
	}
	if info.State != asynq.TaskStateScheduled && info.State != asynq.TaskStateRetry {
		return false, nil // already due or running
	}
	if err := q.insp.RunTask(jobs.Queue, id); err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return false, fmt.Errorf("queue: run task %s now: %w", id, err)
	}
	return true, nil
}

// Info counts the tasks of jobs.Queue and says whether it is paused.
type Info struct {
	Paused                            bool
	Pending, Scheduled, Retry, Active int
}

// Info reads the state of jobs.Queue.
func (q *Queue) Info(ctx context.Context) (Info, error) {
	i, err := q.insp.GetQueueInfo(jobs.Queue)
	if err != nil {
		return Info{}, fmt.Errorf("queue %s: %w", jobs.Queue, err)
	}
	return Info{Paused: i.Paused, Pending: i.Pending, Scheduled: i.Scheduled, Retry: i.Retry, Active: i.Active}, nil
}

// Pause stops jobs.Queue: the workers take no task from it, so nothing is
// sent to the PSP and nothing is lost, until Resume.
func (q *Queue) Pause(ctx context.Context) error {
	if err := q.insp.PauseQueue(jobs.Queue); err != nil {
		return fmt.Errorf("queue: pause %s: %w", jobs.Queue, err)
	}
	return nil
}

// Resume starts jobs.Queue again after Pause.
func (q *Queue) Resume(ctx context.Context) error {
	if err := q.insp.UnpauseQueue(jobs.Queue); err != nil {
		return fmt.Errorf("queue: resume %s: %w", jobs.Queue, err)
	}
	return nil
}

// Register makes jobs.Queue known to Asynq (RegisterQueue), so that it
// can be paused before any task was enqueued.
func (q *Queue) Register(ctx context.Context) error { return RegisterQueue(ctx, q.rdb) }

// Paused reports whether jobs.Queue is paused (QueuePaused).
func (q *Queue) Paused(ctx context.Context) (bool, error) { return QueuePaused(ctx, q.rdb) }

// DropCompleted deletes the completed tasks of jobs.Queue and reports how
// many. It keeps no safety: the ledger decides what a task does and
// Remind replaces a completed task anyway.
func (q *Queue) DropCompleted(ctx context.Context) (int, error) {
	n, err := q.insp.DeleteAllCompletedTasks(jobs.Queue)
	if err != nil {
		return n, fmt.Errorf("queue: drop completed tasks of %s: %w", jobs.Queue, err)
	}
	return n, nil
}

// Collector exports Asynq's queue metrics (sizes, latency, paused) of
// every queue on the Redis to Prometheus.
func (q *Queue) Collector() prometheus.Collector {
	return asynqmetrics.NewQueueMetricsCollector(q.insp)
}

// Liveness judges the tasks of jobs.Queue (Liveness.Live).
func (q *Queue) Liveness(leaseGrace time.Duration) *Liveness { return NewLiveness(q.rdb, leaseGrace) }

// RemoveOrphan removes the task holding id if it is lost (see the
// function RemoveOrphan).
func (q *Queue) RemoveOrphan(ctx context.Context, id string, leaseGrace, forget time.Duration) (Orphan, error) {
	return RemoveOrphan(ctx, q.rdb, id, leaseGrace, forget)
}

// AsynqTask is s's task as Asynq runs it, enqueued at now: for tests that
// hand a task to a handler directly.
func (s Step) AsynqTask(now time.Time) (*asynq.Task, error) {
	t, err := s.task()
	if err != nil {
		return nil, err
	}
	return Asynq(t, now), nil
}
