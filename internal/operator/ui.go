package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/ui"
)

// UIUploads gives the web UI (ui.Uploads) the upload with a preview: a
// file is staged in the spool (loader.StageUpload), validated with the
// spool's options as a dry run, and loaded by Confirm exactly as the spool
// loads a dropped file (loader.LoadStaged).
type UIUploads struct {
	Loader *loader.Loader
	Spool  string
	// Options are the spool's (payout ui --approval, --amount-format,
	// --telecom-operators, --require-control, ...).
	Options loader.SpoolOptions
}

// stagedFor is how long an upload never confirmed is kept.
const stagedFor = 24 * time.Hour

// maxShownErrors bounds the errors listed in a preview.
const maxShownErrors = 5000

// Preview stages and validates an upload.
func (u UIUploads) Preview(ctx context.Context, up ui.Upload) (ui.Preview, error) {
	p := ui.Preview{File: up.Name}
	if up.By == "" {
		return p, ErrMissingOperator
	}
	if err := mayLoad(ctx, up.By); err != nil {
		return p, err
	}
	decl := loader.Control{Source: "the upload form", Rows: up.ExpectRows, Release: up.ReleaseAt}
	if up.ExpectTotal != "" {
		a, err := money.Parse(up.ExpectTotal, 8)
		if err != nil {
			return p, ui.Refuse(fmt.Errorf("expected total %q: %w (write it plain, as 98350.50)", up.ExpectTotal, err))
		}
		decl.Total = a
	}
	if _, err := loader.PurgeStaged(u.Spool, stagedFor); err != nil {
		return p, err
	}
	id, path, err := loader.StageUpload(u.Spool, up.Name, up.File, decl)
	if errors.Is(err, loader.ErrUploadName) {
		return p, ui.Refuse(err)
	}
	if err != nil {
		return p, err
	}
	opts := u.Options.Load
	opts.DryRun, opts.Approval.By = true, up.By
	if err := choose(&opts.File, up.FileChoices); err != nil {
		_ = os.RemoveAll(filepath.Dir(path))
		return p, err
	}
	res, err := u.Loader.LoadFile(ctx, path, opts)
	if err != nil {
		_ = os.RemoveAll(filepath.Dir(path))
		return p, err
	}
	p = previewOf(res, opts.File.Decimals())
	p.Hash, p.FileChoices, p.ExpectRows, p.ExpectTotal = id, up.FileChoices, up.ExpectRows, up.ExpectTotal
	p.Acceptable = res.Loaded && len(res.Errors) == 0 && res.DuplicateOf == nil
	if p.Sample, err = sampleRows(ctx, path, res.File, opts.File, ui.PreviewRows); err != nil {
		_ = os.RemoveAll(filepath.Dir(path))
		return p, err
	}
	for _, r := range p.Sample {
		for _, v := range r.Extra {
			if !slices.Contains(p.ExtraColumns, v.Column) {
				p.ExtraColumns = append(p.ExtraColumns, v.Column)
			}
		}
	}
	if p.Acceptable {
		p.After = afterConfirm(opts.Approval, res.Total, res.Scale)
	}
	if !p.Acceptable {
		_ = os.RemoveAll(filepath.Dir(path)) // nothing to confirm
	}
	return p, nil
}

// Confirm loads the staged upload id (the Preview's Hash), by by.
func (u UIUploads) Confirm(ctx context.Context, id, by string, f ui.FileChoices) (ui.Preview, error) {
	if by == "" {
		return ui.Preview{}, ErrMissingOperator
	}
	if err := mayLoad(ctx, by); err != nil {
		return ui.Preview{}, err
	}
	o := u.Options
	if err := choose(&o.Load.File, f); err != nil {
		return ui.Preview{}, err
	}
	res, err := u.Loader.LoadStaged(ctx, u.Spool, id, by, o)
	switch {
	case errors.Is(err, loader.ErrNotStaged):
		return ui.Preview{}, ui.Refuse(fmt.Errorf("%w: upload the file again", err))
	case errors.Is(err, loader.ErrLocked):
		return ui.Preview{}, ui.Refuse(errors.New("a spool run is busy loading: confirm again in a moment"))
	case err != nil:
		return previewOf(res, o.Load.File.Decimals()), err
	}
	p := previewOf(res, o.Load.File.Decimals())
	p.Hash, p.Loaded, p.Held, p.FileChoices = id, res.Loaded, res.Held, f
	p.ExpectRows, p.ExpectTotal = typedControl(res.Control)
	return p, nil
}

// mayLoad refuses an upload (ui.Forbid) unless the signed-in person of
// ctx (access.FromContext) may load as by (Check).
func mayLoad(ctx context.Context, by string) error {
	p, _ := access.FromContext(ctx)
	if _, err := Check(ctx, p, "load", access.Load, by); err != nil {
		return ui.Forbid(err)
	}
	return nil
}

// errEnoughRows stops the read of a preview's sample.
var errEnoughRows = errors.New("enough rows")

// sampleRows is the first n valid rows of the staged file path as parsed
// with o: externalId, amount with the file's decimals, the destination
// masked and the informational values (card-like numbers masked).
func sampleRows(ctx context.Context, path, name string, o payfile.Options, n int) ([]ui.PreviewRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ui.PreviewRow
	_, err = payfile.CheckEach(ctx, name, f, o, nil, func(r payfile.Row) error {
		row := ui.PreviewRow{Line: r.Line, ExternalID: card.Scrub(r.ExternalID), Amount: r.Amount.StringFixed(o.Decimals()),
			Destination: card.Scrub(r.Destination())}
		for _, v := range r.Info {
			row.Info = append(row.Info, card.Scrub(v))
		}
		for _, p := range r.Extra {
			row.Extra = append(row.Extra, ui.InfoValue{Column: card.Scrub(p.Key), Value: card.Scrub(p.Value)})
		}
		out = append(out, row)
		if len(out) >= n {
			return errEnoughRows
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnoughRows) {
		return nil, fmt.Errorf("preview rows of %s: %w", name, err)
	}
	return out, nil
}

// afterConfirm says, for a person, what a confirmed upload of total will
// do under the approval rule a: the rule of the loader (Loader.hold), read
// here before the load.
func afterConfirm(a loader.Approval, total money.Amount, scale int) string {
	loaded := "Confirm loads the rows as a batch; "
	second := ""
	if a.FourEyes {
		second = " by a second person (four-eyes: not you)"
	}
	switch {
	case a.Required && !(a.AutoBelow.Cmp(money.Zero) > 0 && total.Cmp(a.AutoBelow) < 0):
		return loaded + "it then awaits approval" + second + " (every batch needs one): nothing is sent before."
	case a.MaxBatchTotal.Cmp(money.Zero) > 0 && total.Cmp(a.MaxBatchTotal) > 0:
		return loaded + fmt.Sprintf("its total %s is above the batch limit %s, so it then awaits approval%s: nothing is sent before.",
			total.StringFixed(scale), a.MaxBatchTotal.StringFixed(scale), second)
	case a.DailyLimit.Cmp(money.Zero) > 0:
		return loaded + fmt.Sprintf("the payments are sent at once, unless the sum let go today would pass the daily limit %s: then it awaits approval%s.",
			a.DailyLimit.StringFixed(scale), second)
	}
	return loaded + "the payments are sent at once (no approval needed)."
}

// typedControl is the control totals the upload form declared, as the
// confirm page shows them (kept with the staged file, so they are the
// ones the load checked).
func typedControl(decls []loader.Control) (rows int, total string) {
	for _, c := range decls {
		if !c.Declared() {
			continue
		}
		rows = c.Rows
		if !c.Total.IsZero() {
			total = c.Total.String()
		}
		return rows, total
	}
	return 0, ""
}

// choose applies the upload form's amount format and sheet to o, as
// payout load --amount-format and --sheet do.
func choose(o *payfile.Options, f ui.FileChoices) error {
	if f.AmountFormat != "" {
		af, err := money.ParseFormat(f.AmountFormat)
		if err != nil {
			return ui.Refuse(err)
		}
		o.AmountFormat = af
	}
	if s := strings.TrimSpace(f.Sheet); s != "" {
		o.Sheet = s
	}
	return nil
}

// previewOf shows a load's result, its total with the file's decimals.
func previewOf(res loader.Result, scale int) ui.Preview {
	p := ui.Preview{File: res.File, Batch: res.Batch, Rows: res.Rows, Valid: res.Valid, Total: res.Total.StringFixed(scale),
		Warnings: res.Warnings, SheetRead: res.Sheet, Shown: res.Rows - res.HiddenRows, InfoColumns: res.InfoColumns, LocaleAmounts: res.LocaleAmounts}
	for i, e := range res.Errors {
		if i == maxShownErrors {
			p.Note = fmt.Sprintf("%d more errors not shown", len(res.Errors)-maxShownErrors)
			break
		}
		cell := e.Cell
		if e.Sheet != "" {
			cell = e.Sheet + "!" + e.Cell
		}
		p.Errors = append(p.Errors, ui.UploadError{Line: e.Line, Cell: cell, Column: e.Column, Message: e.Message})
	}
	if d := res.DuplicateOf; d != nil {
		p.Note = fmt.Sprintf("same content as %s, already loaded as batch %s at %s; nothing to load", d.File, d.ID, d.LoadedAt.UTC().Format(time.RFC3339))
		p.LoadedAs = d.ID
	}
	if res.Busy {
		p.Note = "another loader is loading the same content right now"
	}
	return p
}

// errorsSuffix ends the name of a refused file's error listing in the
// spool's outbox.
const errorsSuffix = ".errors.csv"

// Refused lists the spool's refused files: outbox/NAME.errors.csv, newest
// first.
func (u UIUploads) Refused(_ context.Context, limit int) ([]ui.RefusedFile, error) {
	entries, err := os.ReadDir(filepath.Join(u.Spool, loader.Outbox))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ui.RefusedFile
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), errorsSuffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, ui.RefusedFile{Name: name, Refused: info.ModTime(), Size: info.Size()})
	}
	slices.SortFunc(out, func(a, b ui.RefusedFile) int { return b.Refused.Compare(a.Refused) })
	return out[:min(limit, len(out))], nil
}

// RefusedErrors writes the error listing of the refused file name (a base
// name: anything else is not found).
func (u UIUploads) RefusedErrors(_ context.Context, name string, w io.Writer) error {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("refused file %q: %w", name, ui.ErrNotFound)
	}
	f, err := os.Open(filepath.Join(u.Spool, loader.Outbox, name+errorsSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("refused file %q: %w", name, ui.ErrNotFound)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, io.LimitReader(f, 64<<20))
	return err
}
