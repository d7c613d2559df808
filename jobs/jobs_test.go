package jobs

import (
	"testing"
	"time"
)

func TestCreateTaskRoundTrip(t *testing.T) {
	p := CreatePayload{Batch: "b1", ExternalID: "E-1", Attempt: 2, Amount: "10.50", Destination: "card 411111******1111"}
	task, err := NewCreateTask(p)
	if err != nil {
		t.Fatal(err)
	}
	if task.Type != TypeWithdrawalCreate || task.ID != "create:E-1:2" || task.Delay != 0 {
		t.Fatalf("task %+v", task)
	}
	got, err := DecodeCreate(task.Payload)
	if err != nil || got != p {
		t.Fatalf("DecodeCreate = %+v, %v; want %+v", got, err, p)
	}
	if id := CreateTaskID("E-1", 2); id != "create:E-1:2" {
		t.Fatalf("CreateTaskID = %q", id)
	}
}

func TestStatusTaskRoundTrip(t *testing.T) {
	p := StatusPayload{Batch: "b1", ExternalID: "E-1", Seq: 3}
	task, err := NewStatusTask(p, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if task.Type != TypeWithdrawalStatus || task.ID != "status:E-1:3" || task.Delay != time.Second {
		t.Fatalf("task %+v", task)
	}
	got, err := DecodeStatus(task.Payload)
	if err != nil || got != p {
		t.Fatalf("DecodeStatus = %+v, %v", got, err)
	}
}

func TestRefusesIncompletePayloads(t *testing.T) {
	if _, err := NewCreateTask(CreatePayload{Batch: "b"}); err == nil {
		t.Error("create without externalId accepted")
	}
	if _, err := NewStatusTask(StatusPayload{Batch: "b", ExternalID: "x"}, 0); err == nil {
		t.Error("status without seq accepted")
	}
	if _, err := DecodeCreate([]byte(`{"batch":"b"}`)); err == nil {
		t.Error("decode of incomplete create accepted")
	}
}

func TestNotBeforeNeverEarly(t *testing.T) {
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now   time.Time
		delay time.Duration
		want  time.Time
	}{
		{base.Add(900 * time.Millisecond), 500 * time.Millisecond, base.Add(2 * time.Second)},
		{base, time.Second, base.Add(time.Second)},
		{base.Add(1), 0, base.Add(time.Second)},
	} {
		got := NotBefore(c.now, c.delay)
		if !got.Equal(c.want) || got.Unix() < c.now.Add(c.delay).Unix() || got.Before(c.now.Add(c.delay)) {
			t.Errorf("NotBefore(%v, %v) = %v, want %v", c.now, c.delay, got, c.want)
		}
	}
}

func TestWatchTaskRoundTrip(t *testing.T) {
	p := WatchPayload{Batch: "b1", ExternalID: "E-1"}
	task, err := NewWatchTask(p, 1_800_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if task.Type != TypeWithdrawalWatch || task.ID != "watch:E-1:1800000000" || task.Delay != 0 {
		t.Fatalf("task %+v", task)
	}
	if got, err := DecodeWatch(task.Payload); err != nil || got != p {
		t.Fatalf("DecodeWatch = %+v, %v", got, err)
	}
	if _, err := NewWatchTask(WatchPayload{Batch: "b"}, 1); err == nil {
		t.Error("watch without externalId accepted")
	}
}
