package jobs

import (
	"testing"
	"time"
)

func TestCreateTaskRoundTrip(t *testing.T) {
	p := CreatePayload{Batch: "b1", ExternalID: "E-1", Attempt: 2, Amount: "10.50", Destination: "card 411111******1111"}
	task, err := NewCreateTask(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	if task.Type() != TypeWithdrawalCreate {
		t.Fatalf("type %q", task.Type())
	}
	got, err := DecodeCreate(task.Payload())
	if err != nil || got != p {
		t.Fatalf("DecodeCreate = %+v, %v; want %+v", got, err, p)
	}
	if id := CreateTaskID("E-1", 2); id != "create:E-1:2" {
		t.Fatalf("CreateTaskID = %q", id)
	}
}

func TestStatusTaskRoundTrip(t *testing.T) {
	p := StatusPayload{Batch: "b1", ExternalID: "E-1", Seq: 3}
	task, err := NewStatusTask(p, 5, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeStatus(task.Payload())
	if err != nil || got != p {
		t.Fatalf("DecodeStatus = %+v, %v", got, err)
	}
}

func TestRefusesIncompletePayloads(t *testing.T) {
	if _, err := NewCreateTask(CreatePayload{Batch: "b"}, 1); err == nil {
		t.Error("create without externalId accepted")
	}
	if _, err := NewStatusTask(StatusPayload{Batch: "b", ExternalID: "x"}, 1, 0); err == nil {
		t.Error("status without seq accepted")
	}
	if _, err := DecodeCreate([]byte(`{"batch":"b"}`)); err == nil {
		t.Error("decode of incomplete create accepted")
	}
}
