// Package jobs is the queue contract of payout: the Asynq task type names,
// queue name, payload structs, task-ID scheme and task constructors shared by
// the loader, the workers and any other Go service that watches or feeds the
// payout queue. It is the contract only: it holds no client and imports
// neither Asynq nor Redis. internal/queue, the one owner of Asynq in
// payout, turns a [Task] into an Asynq task, enqueues it and reads the
// queue.
//
// # The contract
//
// A payout is identified by its batch (the content hash of the file it came
// from) and its externalId, which is unique across all batches. Its full
// state, including the encrypted destination card number, lives in the
// ledger in Redis. Task payloads carry only references and display fields:
// never a full card number, so a payload shown in the Asynq web UI or a log
// reveals nothing secret.
//
// Four task types exist:
//
//   - [TypeWithdrawalCreate] asks the worker to create the withdrawal order
//     at the PSP. Attempt counts the creates of this payout (1 for the first,
//     2 after the PSP confirmed that an earlier ambiguous create stored
//     nothing, ...). Its task ID is [CreateTaskID], so enqueuing the same
//     attempt twice is refused by Asynq (asynq.ErrTaskIDConflict). A
//     completed or archived task with the ID is no reminder: the queue
//     (internal/queue, Remind) replaces it when the ledger says the step
//     is still due.
//   - [TypeWithdrawalStatus] asks the worker to query the order status after
//     an answer that did not tell whether the order exists. Seq numbers the
//     checks of one payout; its task ID is [StatusTaskID].
//   - [TypeWithdrawalOutcome] follows a created order until the PSP reports
//     it paid or failed (a PSP callback moves the query to now). Its task ID
//     is [OutcomeTaskID].
//   - [TypeWithdrawalVerify] asks the PSP about a payout a person marked
//     rejected, after a PSP callback named it: an order found contradicts
//     the person, and the payout needs review again. Its task ID is
//     [VerifyTaskID].
//
// # Enqueuing a payout from another service
//
// The worker refuses a create task whose payout is not in the ledger, since
// the ledger holds the destination. The supported way for another service to
// submit payouts is to write a payout file (see the README for the CSV
// format) into the spool inbox that `payout load --spool` watches, under
// the delivery contract (docs/operations.md: the file, then NAME.ctl; or a
// rename into inbox/); the loader validates it, writes the ledger and
// enqueues the tasks (internal/queue). Services that only watch the queue
// (dashboards, alerting) use [Queue], the type names and [DecodeCreate] /
// [DecodeStatus].
package jobs

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Task is a payout task as the contract defines it: its type, payload and
// ID; it goes into [Queue] with [MaxRetry] and [Retention]. Delay: it runs
// no sooner than this after it is enqueued ([NotBefore]).
type Task struct {
	Type    string
	Payload []byte
	ID      string
	Delay   time.Duration
}

// Task type names.
const (
	TypeWithdrawalCreate  = "withdrawal:create"
	TypeWithdrawalStatus  = "withdrawal:status"
	TypeWithdrawalOutcome = "withdrawal:outcome"
	TypeWithdrawalVerify  = "withdrawal:verify"
)

// Queue is the Asynq queue that holds every payout task. Pausing it (web UI,
// `payout pause`) stops all traffic toward the PSP.
const Queue = "payouts"

// MaxRetry is the Asynq retry count of every payout task: effectively
// unlimited. Asynq archives a task once its retries are used up even when
// the last error was not a failure (a paused queue, an open breaker) or a
// lease expired, which would strand its payout in an open state. Payout
// keeps its budgets in the ledger instead (create tries, status checks
// without an answer) and archives a task itself, with the reason, when the
// payout reaches needs_review.
const MaxRetry = math.MaxInt32

// Retention keeps completed tasks visible in the web UI and makes their task
// IDs refuse a second enqueue for that long. A day: a completed task costs
// Redis about 600 bytes (its hash and its entry in the completed set), more
// than the payout itself, and keeps no safety: the ledger decides what a
// task does (a create for a payout past queued is skipped), and the queue
// replaces a completed task anyway (internal/queue, Remind). The audit trail is the record.
const Retention = 24 * time.Hour

// CreatePayload is the payload of a withdrawal:create task.
type CreatePayload struct {
	Batch       string `json:"batch"`
	ExternalID  string `json:"externalId"`
	Attempt     int    `json:"attempt"`
	Amount      string `json:"amount"`      // display only; the ledger amount is authoritative
	Destination string `json:"destination"` // masked, e.g. "card 411111******1111"
}

// StatusPayload is the payload of a withdrawal:status task.
type StatusPayload struct {
	Batch       string `json:"batch"`
	ExternalID  string `json:"externalId"`
	Seq         int    `json:"seq"`
	Amount      string `json:"amount"`
	Destination string `json:"destination"`
}

// OutcomePayload is the payload of a withdrawal:outcome task: outcome
// check Seq of a created order, which asks the PSP whether the money was
// sent (paid) or will not be (failed).
type OutcomePayload struct {
	Batch       string `json:"batch"`
	ExternalID  string `json:"externalId"`
	Seq         int    `json:"seq"`
	Amount      string `json:"amount"`
	Destination string `json:"destination"`
}

// OutcomeTaskID is the task ID of the seq-th outcome check of a payout.
func OutcomeTaskID(externalID string, seq int) string {
	return fmt.Sprintf("outcome:%s:%d", externalID, seq)
}

// NewOutcomeTask builds outcome check task p.Seq, to run no sooner than
// delay after it is enqueued.
func NewOutcomeTask(p OutcomePayload, delay time.Duration) (Task, error) {
	if p.Batch == "" || p.ExternalID == "" || p.Seq < 1 {
		return Task{}, fmt.Errorf("jobs: outcome payload needs batch, externalId and seq >= 1")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Task{}, fmt.Errorf("jobs: encode outcome payload: %w", err)
	}
	return Task{Type: TypeWithdrawalOutcome, Payload: b, ID: OutcomeTaskID(p.ExternalID, p.Seq), Delay: delay}, nil
}

// DecodeOutcome reads an outcome payload.
func DecodeOutcome(b []byte) (OutcomePayload, error) {
	var p OutcomePayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("jobs: decode outcome payload: %w", err)
	}
	if p.Batch == "" || p.ExternalID == "" || p.Seq < 1 {
		return p, fmt.Errorf("jobs: outcome payload lacks batch, externalId or seq")
	}
	return p, nil
}

// VerifyPayload is the payload of a withdrawal:verify task: ask the PSP
// whether it holds an order for a payout a person marked rejected.
type VerifyPayload struct {
	Batch      string `json:"batch"`
	ExternalID string `json:"externalId"`
}

// VerifyTaskID is the task ID of the verification a callback received at
// second at (Unix time) asks for: the callbacks of one second share one.
func VerifyTaskID(externalID string, at int64) string {
	return fmt.Sprintf("verify:%s:%d", externalID, at)
}

// NewVerifyTask builds a verification task; at is VerifyTaskID's.
func NewVerifyTask(p VerifyPayload, at int64) (Task, error) {
	if p.Batch == "" || p.ExternalID == "" {
		return Task{}, fmt.Errorf("jobs: verify payload needs batch and externalId")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Task{}, fmt.Errorf("jobs: encode verify payload: %w", err)
	}
	return Task{Type: TypeWithdrawalVerify, Payload: b, ID: VerifyTaskID(p.ExternalID, at)}, nil
}

// DecodeVerify reads a verification payload.
func DecodeVerify(b []byte) (VerifyPayload, error) {
	var p VerifyPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("jobs: decode verify payload: %w", err)
	}
	if p.Batch == "" || p.ExternalID == "" {
		return p, fmt.Errorf("jobs: verify payload lacks batch or externalId")
	}
	return p, nil
}

// CreateTaskID is the task ID of the attempt-th create of a payout.
func CreateTaskID(externalID string, attempt int) string {
	return fmt.Sprintf("create:%s:%d", externalID, attempt)
}

// StatusTaskID is the task ID of the seq-th status check of a payout.
func StatusTaskID(externalID string, seq int) string {
	return fmt.Sprintf("status:%s:%d", externalID, seq)
}

// NewCreateTask builds create task p.Attempt.
func NewCreateTask(p CreatePayload) (Task, error) {
	if p.Batch == "" || p.ExternalID == "" || p.Attempt < 1 {
		return Task{}, fmt.Errorf("jobs: create payload needs batch, externalId and attempt >= 1")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Task{}, fmt.Errorf("jobs: encode create payload: %w", err)
	}
	return Task{Type: TypeWithdrawalCreate, Payload: b, ID: CreateTaskID(p.ExternalID, p.Attempt)}, nil
}

// NewStatusTask builds status check task p.Seq, to be processed no sooner
// than delay after it is enqueued.
func NewStatusTask(p StatusPayload, delay time.Duration) (Task, error) {
	if p.Batch == "" || p.ExternalID == "" || p.Seq < 1 {
		return Task{}, fmt.Errorf("jobs: status payload needs batch, externalId and seq >= 1")
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Task{}, fmt.Errorf("jobs: encode status payload: %w", err)
	}
	return Task{Type: TypeWithdrawalStatus, Payload: b, ID: StatusTaskID(p.ExternalID, p.Seq), Delay: delay}, nil
}

// NotBefore returns the time to give asynq.ProcessAt so that a task runs
// no sooner than delay after now. Asynq keeps scheduled times in whole Unix
// seconds (truncated), so a plain ProcessIn can fire up to a second early;
// NotBefore rounds up to the next whole second instead.
func NotBefore(now time.Time, delay time.Duration) time.Time {
	at := now.Add(delay)
	if t := at.Truncate(time.Second); t.Equal(at) {
		return at
	}
	return at.Truncate(time.Second).Add(time.Second)
}

// DecodeCreate reads a create payload.
func DecodeCreate(b []byte) (CreatePayload, error) {
	var p CreatePayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("jobs: decode create payload: %w", err)
	}
	if p.Batch == "" || p.ExternalID == "" || p.Attempt < 1 {
		return p, fmt.Errorf("jobs: create payload lacks batch, externalId or attempt")
	}
	return p, nil
}

// DecodeStatus reads a status payload.
func DecodeStatus(b []byte) (StatusPayload, error) {
	var p StatusPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("jobs: decode status payload: %w", err)
	}
	if p.Batch == "" || p.ExternalID == "" || p.Seq < 1 {
		return p, fmt.Errorf("jobs: status payload lacks batch, externalId or seq")
	}
	return p, nil
}
