package queue

import (
	"context"
	"testing"
	"time"

	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// newQueue starts an in-process Redis and gives its client, closed at
// cleanup, a Queue and an Asynq inspector on it.
func newQueue(t *testing.T) (*redis.Client, *Queue, *asynq.Inspector) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb, New(rdb), asynq.NewInspectorFromRedisClient(rdb)
}

// TestRemind restores a reminder that an operator deleted or archived in
// the web UI, and leaves a live one alone. Before Remind (then Ensure), the
// ID conflict with the archived task counted as success and the payout was
// stranded.
func TestRemind(t *testing.T) {
	ctx := context.Background()
	_, q, insp := newQueue(t)

	step := Step{Kind: Create, Batch: "b", ExternalID: "E1", N: 1}
	id := jobs.CreateTaskID("E1", 1)
	if step.ID() != id {
		t.Fatalf("step ID %q, want %q", step.ID(), id)
	}
	state := func() asynq.TaskState {
		info, err := insp.GetTaskInfo(jobs.Queue, id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		return info.State
	}
	steps := []struct {
		name   string
		before func()
		want   Reminded
	}{
		{"no task", func() {}, RemindedNew},
		{"pending task", func() {}, RemindedLive},
		{"archived in the UI", func() {
			if err := insp.ArchiveTask(jobs.Queue, id); err != nil {
				t.Fatal(err)
			}
		}, RemindedReplaced},
		{"deleted in the UI", func() {
			if err := insp.DeleteTask(jobs.Queue, id); err != nil {
				t.Fatal(err)
			}
		}, RemindedNew},
	}
	for _, s := range steps {
		s.before()
		got, err := q.Remind(ctx, step)
		if err != nil || got != s.want {
			t.Fatalf("%s: Remind = %v, %v; want %v", s.name, got, err, s.want)
		}
		if st := state(); st != asynq.TaskStatePending {
			t.Fatalf("%s: task is %v afterwards, want pending", s.name, st)
		}
	}
	// Add is the loader's first enqueue: a conflict is success.
	if err := insp.ArchiveTask(jobs.Queue, id); err != nil {
		t.Fatal(err)
	}
	if isNew, err := q.Add(ctx, step); err != nil || isNew {
		t.Fatalf("Add over an archived task = %v, %v", isNew, err)
	}
	// A step in flight is never enqueued again.
	if _, err := q.Remind(ctx, Step{Kind: Create, Batch: "b", ExternalID: "E2", N: 1, InFlight: true}); err == nil {
		t.Fatal("Remind of a step in flight accepted")
	}
}

// TestLiveAgreesWithTheInspector pins Asynq's task layout that Live reads.
func TestLiveAgreesWithTheInspector(t *testing.T) {
	ctx := context.Background()
	rdb, q, insp := newQueue(t)
	var ids []string
	for i := 1; i <= 3; i++ {
		s := Step{Kind: Create, Batch: "b", ExternalID: "E", N: i}
		if _, err := q.Add(ctx, s); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID())
	}
	st := Step{Kind: Status, Batch: "b", ExternalID: "E", N: 1}.In(time.Hour)
	if _, err := q.Add(ctx, st); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, st.ID(), "create:never:1")
	if err := insp.ArchiveTask(jobs.Queue, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := insp.DeleteTask(jobs.Queue, ids[2]); err != nil {
		t.Fatal(err)
	}
	got, err := NewLiveness(rdb, 0).Live(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, false, true, false} // pending, archived, deleted, scheduled, never
	for i := range ids {
		if got[i] != want[i] {
			t.Errorf("Live(%s) = %v, want %v", ids[i], got[i], want[i])
		}
	}
}
