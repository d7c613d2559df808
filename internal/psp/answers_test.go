package psp

import (
	"net/http"
	"testing"
)

// TestAnswersTable: the answer table names each status at most once per
// request, never 200 (read by classifyOK), and never an answer that does
// not tell whether the order exists (423, 499 and above): those must stay
// Ambiguous, followed by status checks, never by a second create.
func TestAnswersTable(t *testing.T) {
	seen := map[Operation]map[int]bool{}
	for _, a := range Answers {
		if len(a.Ops) == 0 || len(a.Statuses) == 0 {
			t.Errorf("row without request or status: %+v", a)
		}
		for _, op := range a.Ops {
			if seen[op] == nil {
				seen[op] = map[int]bool{}
			}
			for _, st := range a.Statuses {
				if seen[op][st] {
					t.Errorf("%s: HTTP %d named twice", op, st)
				}
				seen[op][st] = true
				if st == http.StatusOK || st == http.StatusLocked || st >= 499 {
					t.Errorf("%s: HTTP %d is in the table as %s; it must stay Ambiguous", op, st, a.Outcome)
				}
				if st >= 300 && st < 400 {
					t.Errorf("%s: HTTP %d is in the table as %s; a redirect is about another path and must stay Ambiguous", op, st, a.Outcome)
				}
				if a.Outcome == Ambiguous {
					t.Errorf("%s: HTTP %d: Ambiguous is what the table's absence means", op, st)
				}
			}
		}
	}
	// Every row is what Classify answers.
	for _, a := range Answers {
		for _, op := range a.Ops {
			for _, st := range a.Statuses {
				if got := Classify(op, st, http.Header{}, []byte("{}"), nil, true); got.Outcome != a.Outcome {
					t.Errorf("%s HTTP %d: Classify says %s, the table %s", op, st, got.Outcome, a.Outcome)
				}
			}
		}
	}
	for _, st := range []int{http.StatusLocked, 499, 500, 502, 503, 504, 418} {
		for _, op := range []Operation{OpWithdrawalCreate, OpWithdrawalStatus} {
			if got := Classify(op, st, http.Header{}, nil, nil, true); got.Outcome != Ambiguous {
				t.Errorf("%s HTTP %d: %s, want Ambiguous", op, st, got.Outcome)
			}
		}
	}
}
