package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/decide"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// TestTransitionsOfAnUnknownPayout: every transition answers ErrNotFound
// for a payout that does not exist, never a decision, and never a
// CheckOutcome (the PSP's 404 is Missing, a different thing).
func TestTransitionsOfAnUnknownPayout(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 1)
	policy := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 3}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"BeginCreate", func() error { _, err := l.BeginCreate(ctx, "b", "nope", 1); return err }},
		{"FinishCreate", func() error {
			_, err := l.FinishCreate(ctx, "b", "nope", 1, decide.CreateResult{To: lifecycle.Queued, MaxTries: 2})
			return err
		}},
		{"RecordCheck", func() error {
			_, err := recordCheck(ctx, l, "b", "nope", 1, decide.CheckAnswer{Outcome: decide.Missing}, policy)
			return err
		}},
		{"RecordOutcome", func() error {
			_, err := recordOutcome(ctx, l, "b", "nope", 1, decide.VerdictPaid, "Paid", "", 200)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v, want ErrNotFound", err)
			}
		})
	}
}

// TestReplyParsing: a reply that is short or whose numbers do not parse is
// an error, never a zero taken for a sequence or an attempt.
func TestReplyParsing(t *testing.T) {
	reply := func(v ...any) *redis.Cmd {
		c := redis.NewCmd(context.Background())
		c.SetVal(v)
		return c
	}
	full := []any{"check", "3", "", "checking", "1", "3", "10.50", "card 411111******1111", "", "", "", "0", "0"}
	for _, tc := range []struct {
		name    string
		cmd     *redis.Cmd
		wantErr string
		wantSeq int
	}{
		{"whole reply", reply(full...), "", 3},
		{"no such payout", reply("nopayout"), "not found", 0},
		{"short", reply("check", "3"), "has 2 elements", 0},
		{"seq not a number", reply(append([]any{"check", "x"}, full[2:]...)...), "element 1", 0},
		{"creates not a number", reply(append(append([]any{}, full[:4]...), append([]any{"1.5"}, full[5:]...)...)...), "element 4", 0},
		{"epoch not a number", reply(append(append([]any{}, full[:12]...), "e")...), "element 12", 0},
		{"no epoch (a script of before)", reply(full[:12]...), "has 12 elements", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := parseBegin("b", "E1", tc.cmd)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
			case tc.wantErr == "" && (b.Seq != tc.wantSeq || b.Payout.State != lifecycle.Checking || b.Payout.Amount != "10.50"):
				t.Fatalf("begin = %+v", b)
			}
		})
	}
}

// TestStepsCarryTheirNotes: the step of a transition that moved a payout
// to needs_review carries the error it recorded, so the worker needs no
// read-back.
func TestStepsCarryTheirNotes(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 2)
	if _, err := l.BeginCreate(ctx, "b", "E1", 1); err != nil {
		t.Fatal(err)
	}
	fin, err := l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "HTTP 429", MaxTries: 1})
	if err != nil || fin.State != lifecycle.Queued || fin.Error != "HTTP 429" {
		t.Fatalf("finish within the budget = %+v, %v", fin, err)
	}
	b, err := l.BeginCreate(ctx, "b", "E1", 1)
	if err != nil {
		t.Fatal(err)
	}
	fin, err = l.FinishCreate(ctx, "b", "E1", 1, decide.CreateResult{To: lifecycle.Queued, Error: "HTTP 429", MaxTries: 1, Tries: b.Payout.Tries})
	if err != nil || fin.State != lifecycle.NeedsReview || fin.Error != decide.TriesNote(1, "HTTP 429") {
		t.Fatalf("finish past the budget = %+v, %v", fin, err)
	}
	if got, _ := l.Get(ctx, "b", "E1"); got.Error != fin.Error {
		t.Fatalf("stored error %q, step says %q", got.Error, fin.Error)
	}
	if _, err := l.BeginCreate(ctx, "b", "E2", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FinishCreate(ctx, "b", "E2", 1, decide.CreateResult{To: lifecycle.Checking, Error: "timeout"}); err != nil {
		t.Fatal(err)
	}
	p := decide.CheckPolicy{AbsentChecks: 2, AbsentSpacing: time.Minute, MaxCreates: 2, MaxFaults: 1}
	step, err := recordCheck(ctx, l, "b", "E2", 1, decide.CheckAnswer{Outcome: decide.NoAnswer, Message: "HTTP 502"}, p)
	if err != nil || step.Action != decide.CheckReview || step.Error != "status unknown after 1 status checks without an answer: HTTP 502" {
		t.Fatalf("RecordCheck = %+v, %v", step, err)
	}
	got, err := l.Get(ctx, "b", "E2")
	if err != nil || got.State != lifecycle.NeedsReview || got.Error != step.Error {
		t.Fatalf("payout %s %q, want needs_review %q (%v)", got.State, got.Error, step.Error, err)
	}
}
