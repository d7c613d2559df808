package queue

import (
	"context"
	"testing"

	"github.com/acme/payout/jobs"
)

// TestQueuePausedAgreesWithTheInspector: QueuePaused says what Asynq's
// inspector says, before a pause, during it and after the resume.
func TestQueuePausedAgreesWithTheInspector(t *testing.T) {
	ctx := context.Background()
	rdb, q, insp := newQueue(t)
	// The queue exists once a task is in it.
	if _, err := q.Add(ctx, Step{Kind: Create, Batch: "b", ExternalID: "E1", N: 1}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func(context.Context) error
	}{{"before", nil}, {"paused", q.Pause}, {"resumed", q.Resume}} {
		if step.do != nil {
			if err := step.do(ctx); err != nil {
				t.Fatal(err)
			}
		}
		info, err := insp.GetQueueInfo(jobs.Queue)
		if err != nil {
			t.Fatal(err)
		}
		got, err := QueuePaused(ctx, rdb)
		if err != nil || got != info.Paused {
			t.Errorf("%s: QueuePaused %v, %v; the inspector says %v", step.name, got, err, info.Paused)
		}
		if qi, err := q.Info(ctx); err != nil || qi.Paused != info.Paused {
			t.Errorf("%s: Info %+v, %v; the inspector says paused %v", step.name, qi, err, info.Paused)
		}
	}
}

// TestPauseAFreshQueue: before any task was enqueued the inspector does
// not know the queue (GetQueueInfo NOT_FOUND: payout pause and resume
// failed on a fresh stack);
// once registered it is paused and resumed like any other, and a task
// enqueued later waits.
func TestPauseAFreshQueue(t *testing.T) {
	ctx := context.Background()
	rdb, q, insp := newQueue(t)
	if _, err := insp.GetQueueInfo(jobs.Queue); err == nil {
		t.Fatal("the inspector knows a queue never enqueued to: the test proves nothing")
	}
	if err := RegisterQueue(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	if err := insp.PauseQueue(jobs.Queue); err != nil {
		t.Fatalf("pause after RegisterQueue: %v", err)
	}
	if paused, err := QueuePaused(ctx, rdb); err != nil || !paused {
		t.Fatalf("QueuePaused %v %v", paused, err)
	}
	if _, err := q.Add(ctx, Step{Kind: Create, Batch: "b", ExternalID: "E1", N: 1}); err != nil {
		t.Fatal(err)
	}
	info, err := insp.GetQueueInfo(jobs.Queue)
	if err != nil || !info.Paused || info.Pending != 1 {
		t.Fatalf("after an enqueue: %+v %v", info, err)
	}
}
