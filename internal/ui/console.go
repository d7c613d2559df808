package ui

import (
	"context"
	"errors"
	"io"
	"time"
)

// Console feeds the finance console's pages: a batch and its payouts,
// paged on the server; a payout and its history; the search of an
// externalId across batches; the work queue; and the downloads of a
// batch. The operator package implements it on the ledger.
type Console interface {
	// Batch is one batch's header; ErrNotFound when there is none.
	Batch(ctx context.Context, id string) (BatchDetail, error)
	// Payouts is one page of a batch's payouts.
	Payouts(ctx context.Context, id string, q PayoutQuery) (PayoutPage, error)
	// Payout is one payout and its audit trail, oldest first.
	Payout(ctx context.Context, batch, ext string) (PayoutView, []AuditView, error)
	// Find returns the payouts with this externalId, in every batch.
	Find(ctx context.Context, ext string) ([]PayoutView, error)
	// Review lists the payouts that need a person (needs_review), across
	// batches, at most limit.
	Review(ctx context.Context, limit int) ([]PayoutView, error)
	// Download writes file kind (one of DownloadKinds) of a batch to w.
	Download(ctx context.Context, batch, kind string, w io.Writer) error
}

// PayoutControls carries out the decisions on one payout taken in the
// UI, through the same ledger calls as payout resolve and payout cancel.
// Controls implement it when the UI may act on payouts.
type PayoutControls interface {
	// DecidePayout applies d to payout ext of batch and says what was
	// done; a refusal matches ErrRefused.
	DecidePayout(ctx context.Context, batch, ext string, d Decision) (string, error)
}

// The decisions on a payout (Decision.Action).
const (
	DecideRecheck  = "recheck"  // needs_review -> checking, a status check enqueued
	DecideCreated  = "created"  // needs_review -> created, with the PSP order id
	DecideRejected = "rejected" // needs_review -> rejected
	DecideCancel   = "cancel"   // queued or held -> cancelled
	DecideRelease  = "release"  // held -> queued, over the recipient velocity limit
)

// Decision is one person's decision on a payout.
type Decision struct {
	Action    string
	OrderID   string // DecideCreated: the PSP's order id (required)
	PSPStatus string // DecideCreated: optional
	By        string // the signed-in person
	Note      string // why (required)
}

// ErrNotFound is matched by the Console's errors for a batch or payout
// that does not exist: the UI answers 404.
var ErrNotFound = errors.New("not found")

// The files a batch page offers (Console.Download).
const (
	DownloadResult = "result.csv"  // the result file: a clean table, one row per payout (as payout report writes it)
	DownloadXLSX   = "result.xlsx" // the result workbook: a Payouts sheet and a Summary sheet
	// DownloadResultEU is the result file for a spreadsheet in a
	// decimal-comma locale ("Excel (EU)"): ';' between cells, 1500,50,
	// a UTF-8 BOM, as such a spreadsheet writes and opens a CSV.
	DownloadResultEU = "result-excel-eu.csv"
	DownloadSummary  = "summary.txt" // the summary and reconciliation of the result file
	DownloadFailed   = "failed.csv"  // the failed and rejected payouts with their reasons, masked
	DownloadAudit    = "audit.csv"   // the batch's audit trail
)

// DownloadKinds are the downloads in the order the page lists them.
var DownloadKinds = []string{DownloadResult, DownloadResultEU, DownloadXLSX, DownloadSummary, DownloadFailed, DownloadAudit}

// BatchDetail is a batch's header on its page.
type BatchDetail struct {
	BatchView
	Scale int
	// Amounts per state, with the batch's decimals.
	Amounts   map[string]string
	DecidedBy string
	DecidedAt time.Time
	Note      string
	Reported  bool
	// InfoColumns names the file's informational columns (notes,
	// recipient, phone...): each payout's PayoutView.Info holds their
	// values, in this order.
	InfoColumns []string
}

// PayoutQuery selects a page of a batch's payouts.
type PayoutQuery struct {
	State  string // "" for every state
	Sort   string // SortLine (default), SortAmountDesc or SortAmountAsc
	Offset int
	Limit  int
}

// The orders of a batch's payouts.
const (
	SortLine       = "line"
	SortAmountDesc = "-amount"
	SortAmountAsc  = "amount"
)

// PayoutPage is one page of payouts and how many match the query.
type PayoutPage struct {
	Rows  []PayoutView
	Total int
}

// PayoutView is one payout as the console shows it: amounts with the
// batch's decimals, the destination masked.
type PayoutView struct {
	Batch       string
	File        string
	Line        int
	ExternalID  string
	Amount      string
	Destination string
	State       string
	Awaiting    bool
	OrderID     string
	PSPStatus   string
	Reason      string
	Attempts    int
	ResolvedBy  string
	Resolution  string
	ResolvedAt  time.Time
	UpdatedAt   time.Time
	// Proposal, under four-eyes, is a resolution one person proposed that
	// waits for a second person, as a sentence ("" when none is pending).
	Proposal string
	// Task is the id of the payout's latest task in the payouts queue.
	Task string
	// Queue is that task's queue.
	Queue string
	// Info holds the row's values of the batch's informational columns
	// (BatchDetail.InfoColumns: notes, recipient, phone...), in that
	// order, card numbers masked; nil when the file had none.
	Info []InfoValue
	// Extra holds the further destination properties the file gave and
	// the PSP is sent (phoneNumber, bankName...), in the file's order.
	Extra []InfoValue
	// DestinationType is the destination's kind: "card" or "telecom".
	DestinationType string
	// ReleaseAt is when a scheduled payout is released (zero: none).
	ReleaseAt time.Time
}

// InfoValue is a payout's value of one informational column of its file.
type InfoValue struct {
	Column, Value string
}

// AuditView is one entry of a payout's history.
type AuditView struct {
	Time     time.Time
	Actor    string
	Role     string // the role the person acted in ("" a worker, or before roles)
	From, To string
	Note     string
	Details  string // the other context (attempt, seq, order, http...)
}

// RefusedFiles lists the error files of the payout files the spool
// refused (outbox/NAME.errors.csv). The Uploads implement it when the UI
// has a spool.
type RefusedFiles interface {
	// Refused lists the refused files, newest first, at most limit.
	Refused(ctx context.Context, limit int) ([]RefusedFile, error)
	// RefusedErrors writes the error file of the refused file name to w;
	// ErrNotFound when there is none.
	RefusedErrors(ctx context.Context, name string, w io.Writer) error
}

// RefusedFile is a refused payout file.
type RefusedFile struct {
	Name    string // the payout file's name
	Refused time.Time
	Size    int64 // of its error file
}
