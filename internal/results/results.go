package results

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/view"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/report"
)

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
	return rowsOf(func(fn func(ledger.Payout) error) error { return view.New(l.Redis()).Each(ctx, batch, fn) })
}

// rowsOf iterates as report rows the payouts each calls its argument
// with, in that order: a batch in the ledger (Rows) or in an archive file
// (ArchivedRows).
func rowsOf(each func(fn func(ledger.Payout) error) error) iter.Seq2[report.Row, error] {
	return func(yield func(report.Row, error) bool) {
		stop := errors.New("stop")
		err := each(func(p ledger.Payout) error {
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

// Write writes the result file of a batch in format (report.Write: csv,
// json or xlsx). A CSV result is a clean table (header and rows): see
// WriteWith for the old layout with the summary trailer.
func Write(ctx context.Context, l *ledger.Ledger, batch, format string, w io.Writer) (report.Summary, error) {
	return WriteWith(ctx, l, batch, format, w, report.CSVOptions{})
}

// WriteWith is Write with the options of a CSV.
func WriteWith(ctx context.Context, l *ledger.Ledger, batch, format string, w io.Writer, o report.CSVOptions) (report.Summary, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return report.Summary{}, err
	}
	return report.Write(w, format, Batch(b), Rows(ctx, l, batch), o)
}

// WriteCSV writes the result CSV of a batch (a clean table) to w: the
// UI's download.
func WriteCSV(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) (report.Summary, error) {
	return Write(ctx, l, batch, report.CSV, w)
}

// WriteXLSX writes the result workbook of a batch (Payouts and Summary
// sheets) to w: the UI's download.
func WriteXLSX(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) (report.Summary, error) {
	return Write(ctx, l, batch, report.XLSX, w)
}

// WriteSummary writes the summary file of a batch (report.WriteSummary:
// the batch, totals by state and outcome group, the reconciliation) to w.
func WriteSummary(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) (report.Summary, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return report.Summary{}, err
	}
	rb := Batch(b)
	s, err := report.Summarize(rb, Rows(ctx, l, batch))
	if err != nil {
		return s, err
	}
	return s, report.WriteSummary(w, rb, s)
}

// WriteAudit writes the audit trail of a batch to w, one JSON object per
// line (ledger.AuditEntry, in time order), with card numbers in notes and
// other context masked (card.Scrub).
func WriteAudit(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) error {
	enc := json.NewEncoder(w)
	return l.Audit().Each(ctx, batch, "", func(e ledger.AuditEntry) error {
		e.Actor = card.Scrub(e.Actor)
		for k, v := range e.Context {
			e.Context[k] = card.Scrub(v)
		}
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("audit trail of %s: %w", batch, err)
		}
		return nil
	})
}

// WriteFiles writes the result file of a batch to path, and its summary
// file beside it, through report.WriteFiles (each file complete or absent).
func WriteFiles(ctx context.Context, l *ledger.Ledger, batch, path, format string, o report.CSVOptions) (report.Summary, []report.File, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return report.Summary{}, nil, err
	}
	return report.WriteFiles(path, format, Batch(b), Rows(ctx, l, batch), o)
}
