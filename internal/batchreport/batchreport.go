// Package batchreport reads a batch from the ledger and writes it through
// package report: the bridge between the Redis state and the files finance
// receives.
package batchreport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/report"
)

// Formats accepted by Write.
const (
	CSV  = "csv"
	JSON = "json"
)

// ErrFormat is returned for an unknown format.
var ErrFormat = errors.New("unknown report format (want csv or json)")

// Batch converts ledger metadata.
func Batch(b ledger.Batch) report.Batch {
	return report.Batch{ID: b.ID, File: b.File, LoadedAt: b.LoadedAt, Rows: int(b.Rows), Total: b.Total, Scale: b.Scale,
		InfoColumns: b.InfoColumns}
}

// Row converts one payout.
func Row(p ledger.Payout) (report.Row, error) {
	amount, err := money.Parse(p.Amount, 18)
	if err != nil {
		return report.Row{}, fmt.Errorf("payout %s: ledger amount %q: %w", p.ExternalID, p.Amount, err)
	}
	return report.Row{
		Line: p.Line, ExternalID: p.ExternalID, Amount: amount, Destination: p.Destination,
		State: string(p.State), PSPOrderID: p.OrderID, PSPStatus: p.PSPStatus, Attempts: p.Creates,
		Error: p.Error, UpdatedAt: p.UpdatedAt, ResolvedBy: p.ResolvedBy, ResolutionNote: p.ResolutionNote,
		Awaiting: p.Awaiting, Info: ledger.UnpackInfo(p.Info),
	}, nil
}

// Rows iterates the payouts of a batch in file order as report rows.
func Rows(ctx context.Context, l *ledger.Ledger, batch string) iter.Seq2[report.Row, error] {
	return func(yield func(report.Row, error) bool) {
		stop := errors.New("stop")
		err := l.Each(ctx, batch, func(p ledger.Payout) error {
			r, err := Row(p)
			if err != nil {
				return err
			}
			if !yield(r, nil) {
				return stop
			}
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			yield(report.Row{}, err)
		}
	}
}

// Write writes the result file of a batch in format (csv or json).
func Write(ctx context.Context, l *ledger.Ledger, batch, format string, w io.Writer) (report.Summary, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return report.Summary{}, err
	}
	switch format {
	case CSV, "":
		return report.WriteCSV(w, Batch(b), Rows(ctx, l, batch))
	case JSON:
		return report.WriteJSON(w, Batch(b), Rows(ctx, l, batch))
	}
	return report.Summary{}, fmt.Errorf("%q: %w", format, ErrFormat)
}
