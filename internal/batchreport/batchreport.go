// Package batchreport reads a batch from the ledger and writes it through
// package report: the bridge between the Redis state and the files finance
// receives.
package batchreport

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/view"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/report"
)

// Formats accepted by Write.
const (
	CSV  = "csv"
	JSON = "json"
	XLSX = "xlsx"
)

// ErrFormat is returned for an unknown format.
var ErrFormat = errors.New("unknown report format (want csv, json or xlsx)")

// FormatOf is the format a result file's name asks for: xlsx for .xlsx,
// json for .json, csv otherwise.
func FormatOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".xlsx":
		return XLSX
	case ".json":
		return JSON
	}
	return CSV
}

// Options change what Write writes.
type Options struct {
	// SummaryInCSV: a CSV result file ends with the "# ..." summary trailer
	// (the old layout; report.CSVOptions).
	SummaryInCSV bool
	// ExcelEU: a CSV result file for a decimal-comma spreadsheet: ';',
	// 1500,50 and a UTF-8 BOM (report.CSVOptions).
	ExcelEU bool
}

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
	return RowsOf(func(fn func(ledger.Payout) error) error { return view.New(l.Redis()).Each(ctx, batch, fn) })
}

// RowsOf iterates as report rows the payouts each calls its argument
// with, in that order: a batch in the ledger (Rows) or in an archive file.
func RowsOf(each func(fn func(ledger.Payout) error) error) iter.Seq2[report.Row, error] {
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

// Write writes the result file of a batch in format (csv, json or xlsx).
// A CSV result is a clean table (header and rows): see WriteWith for the
// old layout with the summary trailer.
func Write(ctx context.Context, l *ledger.Ledger, batch, format string, w io.Writer) (report.Summary, error) {
	return WriteWith(ctx, l, batch, format, w, Options{})
}

// WriteWith is Write with options.
func WriteWith(ctx context.Context, l *ledger.Ledger, batch, format string, w io.Writer, o Options) (report.Summary, error) {
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return report.Summary{}, err
	}
	switch format {
	case CSV, "":
		return report.WriteCSVWith(w, Batch(b), Rows(ctx, l, batch), report.CSVOptions{SummaryInCSV: o.SummaryInCSV, ExcelEU: o.ExcelEU})
	case JSON:
		return report.WriteJSON(w, Batch(b), Rows(ctx, l, batch))
	case XLSX:
		return report.WriteXLSX(w, Batch(b), Rows(ctx, l, batch))
	}
	return report.Summary{}, fmt.Errorf("%q: %w", format, ErrFormat)
}

// WriteCSV writes the result CSV of a batch (a clean table) to w: the
// UI's download.
func WriteCSV(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) (report.Summary, error) {
	return Write(ctx, l, batch, CSV, w)
}

// WriteXLSX writes the result workbook of a batch (Payouts and Summary
// sheets) to w: the UI's download.
func WriteXLSX(ctx context.Context, l *ledger.Ledger, batch string, w io.Writer) (report.Summary, error) {
	return Write(ctx, l, batch, XLSX, w)
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

// File is one file WriteFiles wrote.
type File struct {
	Path string
	Kind string // "result" or "summary"
}

// WriteFiles writes the result file of a batch to path in format (""
// for the format its name asks for: FormatOf) and, for a CSV without the summary trailer, the summary file
// beside it (report.SummaryPath): a JSON result holds its summary, an
// XLSX its Summary sheet. Each file is written to a temporary file in the
// same folder and renamed into place when complete (mode 0640), so that a
// reader never sees half a file. It returns the summary and the files
// written.
func WriteFiles(ctx context.Context, l *ledger.Ledger, batch, path, format string, o Options) (report.Summary, []File, error) {
	if format == "" {
		format = FormatOf(path)
	}
	var sum report.Summary
	err := writeAtomic(path, func(w io.Writer) (err error) {
		sum, err = WriteWith(ctx, l, batch, format, w, o)
		return err
	})
	if err != nil {
		return sum, nil, err
	}
	files := []File{{Path: path, Kind: "result"}}
	if (format != CSV && format != "") || o.SummaryInCSV {
		return sum, files, nil
	}
	b, err := l.Batch(ctx, batch)
	if err != nil {
		return sum, files, err
	}
	sp := report.SummaryPath(path)
	if err := writeAtomic(sp, func(w io.Writer) error { return report.WriteSummary(w, Batch(b), sum) }); err != nil {
		return sum, files, err
	}
	return sum, append(files, File{Path: sp, Kind: "summary"}), nil
}

// writeAtomic writes path through a temporary file in its folder, renamed
// into place once write returned nil; on error nothing is left behind.
func writeAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o640)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
