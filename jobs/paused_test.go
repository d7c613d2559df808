package jobs

import (
	"context"
	"testing"
)

// TestQueuePausedAgreesWithTheInspector: QueuePaused says what Asynq's
// inspector says, before a pause, during it and after the resume.
func TestQueuePausedAgreesWithTheInspector(t *testing.T) {
	ctx := context.Background()
	rdb, c, insp := newQueue(t)
	// The queue exists once a task is in it.
	tk, err := NewCreateTask(CreatePayload{Batch: "b", ExternalID: "E1", Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(tk); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func(string) error
	}{{"before", nil}, {"paused", insp.PauseQueue}, {"resumed", insp.UnpauseQueue}} {
		if step.do != nil {
			if err := step.do(Queue); err != nil {
				t.Fatal(err)
			}
		}
		info, err := insp.GetQueueInfo(Queue)
		if err != nil {
			t.Fatal(err)
		}
		got, err := QueuePaused(ctx, rdb)
		if err != nil || got != info.Paused {
			t.Errorf("%s: QueuePaused %v, %v; the inspector says %v", step.name, got, err, info.Paused)
		}
	}
}
