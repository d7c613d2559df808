package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// newQueue starts an in-process Redis and gives its client, closed at
// cleanup, with an Asynq client and inspector on it.
func newQueue(t *testing.T) (*redis.Client, *asynq.Client, *asynq.Inspector) {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb, asynq.NewClientFromRedisClient(rdb), asynq.NewInspectorFromRedisClient(rdb)
}

// TestEnsure restores a reminder that an operator deleted or archived in
// the web UI, and leaves a live one alone. Before Ensure, the ID conflict
// with the archived task counted as success and the payout was stranded.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	_, c, insp := newQueue(t)

	p := CreatePayload{Batch: "b", ExternalID: "E1", Attempt: 1}
	id := CreateTaskID(p.ExternalID, p.Attempt)
	task := func() *asynq.Task {
		tk, err := NewCreateTask(p)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	state := func() asynq.TaskState {
		info, err := insp.GetTaskInfo(Queue, id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		return info.State
	}
	steps := []struct {
		name   string
		before func()
		want   Ensured
	}{
		{"no task", func() {}, EnsuredNew},
		{"pending task", func() {}, EnsuredLive},
		{"archived in the UI", func() {
			if err := insp.ArchiveTask(Queue, id); err != nil {
				t.Fatal(err)
			}
		}, EnsuredReplaced},
		{"deleted in the UI", func() {
			if err := insp.DeleteTask(Queue, id); err != nil {
				t.Fatal(err)
			}
		}, EnsuredNew},
	}
	for _, s := range steps {
		s.before()
		got, err := Ensure(ctx, c, insp, task(), id)
		if err != nil || got != s.want {
			t.Fatalf("%s: Ensure = %v, %v; want %v", s.name, got, err, s.want)
		}
		if st := state(); st != asynq.TaskStatePending {
			t.Fatalf("%s: task is %v afterwards, want pending", s.name, st)
		}
	}
	// Enqueue keeps its old meaning for the loader: a conflict is success.
	if err := insp.ArchiveTask(Queue, id); err != nil {
		t.Fatal(err)
	}
	if isNew, err := Enqueue(ctx, c, task()); err != nil || isNew {
		t.Fatalf("Enqueue over an archived task = %v, %v", isNew, err)
	}
}

// TestLiveAgreesWithTheInspector pins Asynq's task layout that Live reads.
func TestLiveAgreesWithTheInspector(t *testing.T) {
	ctx := context.Background()
	rdb, c, insp := newQueue(t)
	var ids []string
	for i := 1; i <= 3; i++ {
		p := CreatePayload{Batch: "b", ExternalID: "E", Attempt: i}
		tk, err := NewCreateTask(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Enqueue(tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, CreateTaskID("E", i))
	}
	st, err := NewStatusTask(StatusPayload{Batch: "b", ExternalID: "E", Seq: 1}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(st); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, StatusTaskID("E", 1), "create:never:1")
	if err := insp.ArchiveTask(Queue, ids[1]); err != nil {
		t.Fatal(err)
	}
	if err := insp.DeleteTask(Queue, ids[2]); err != nil {
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
