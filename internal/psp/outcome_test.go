package psp

import (
	"errors"
	"strings"
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

// TestReturnedStatusWords: the default vocabulary of money that came
// back, in its case and locale variants, is OrderReturned; a paid word
// stays paid, and a word both paid and returned is refused.
func TestReturnedStatusWords(t *testing.T) {
	base, err := NewStatusWords(DefaultPaidStatuses, DefaultFailedStatuses)
	if err != nil {
		t.Fatal(err)
	}
	w, err := base.WithReturned(DefaultReturnedStatuses)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		word string
		want OrderOutcome
	}{
		{"returned", OrderReturned}, {"RETURNED", OrderReturned}, {" Reversed ", OrderReturned},
		{"REFUNDED", OrderReturned}, {"Chargeback", OrderReturned}, {"charge-back", OrderReturned},
		{"CHARGE_BACK", OrderReturned}, {"ＲＥＦＵＮＤＥＤ", OrderReturned}, {"ReVeRsEd", OrderReturned},
		{"PAİD", OrderPaid}, {"paıd", OrderPaid}, {"Paid", OrderPaid},
		{"Failed", OrderFailed}, {"returned_partially", OrderPending}, {"Created", OrderPending},
	} {
		if got := w.Outcome(tt.word); got != tt.want {
			t.Errorf("Outcome(%q) = %v, want %v", tt.word, got, tt.want)
		}
	}
	if got := base.Outcome("refunded"); got != OrderPending {
		t.Errorf("without WithReturned, refunded = %v, want pending", got)
	}
	if _, err := base.WithReturned([]string{"Paid"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a word both paid and returned: %v", err)
	}
}

func TestReturnTimeIsRead(t *testing.T) {
	res := Classify(OpWithdrawalStatus, 200, nil,
		[]byte(`{"pspDepositOrderID":"WD-1","externalId":"E1","amount":"1.00","status":"Returned","reason":"account closed 4111111111111111","returnedAt":"2026-12-01T10:00:00Z"}`), nil, true)
	if res.Order.Status != "Returned" || res.Order.ChangedAt != "2026-12-01T10:00:00Z" {
		t.Fatalf("%+v", res.Order)
	}
	if strings.Contains(res.Order.Reason, "4111111111111111") {
		t.Fatalf("reason not scrubbed: %q", res.Order.Reason)
	}
}
