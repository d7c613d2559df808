package psp

import (
	"errors"
	"testing"
)

func TestStatusWords(t *testing.T) {
	w, err := NewStatusWords(DefaultPaidStatuses, DefaultFailedStatuses)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		word string
		want OrderOutcome
	}{
		{"Paid", OrderPaid}, {" SUCCESS ", OrderPaid}, {"Completed", OrderPaid},
		{"Failed", OrderFailed}, {"declined", OrderFailed}, {"Cancelled", OrderFailed},
		{"Created", OrderPending}, {"Processing", OrderPending}, {"", OrderPending}, {"paid_out", OrderPending},
	} {
		if got := w.Outcome(tt.word); got != tt.want {
			t.Errorf("Outcome(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
	if _, err := NewStatusWords([]string{"done"}, []string{"Done"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a word in both lists: %v", err)
	}
}

func TestFailureReasonIsRead(t *testing.T) {
	res := Classify(OpWithdrawalStatus, 200, nil,
		[]byte(`{"pspDepositOrderID":"WD-1","externalId":"E1","amount":"1.00","status":"Failed","statusReason":"card blocked by issuer"}`), nil, true)
	if res.Outcome != Created || res.Order.Status != "Failed" || res.Order.Reason != "card blocked by issuer" {
		t.Fatalf("%+v", res)
	}
}
