package api

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
)

// maxListed bounds the item errors listed in a refusal (Problem.More
// counts the rest).
const maxListed = 1000

// createBatch: POST /api/v1/batches. The items become a CSV payout file
// (intake.go) loaded by the loader as any file is, by the token's
// identity: the same rules, limits, all-or-nothing, content hash and
// approval rule. Problems of an item's shape (a number for an amount, a
// control character) refuse the batch too: the loader then only checks
// the rest (a dry run), so that every error is listed at once.
func (s *Server) createBatch(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	switch media := mediaType(r); media {
	case mediaJSON:
	case mediaCSV, mediaXLSX:
		return s.createFromFile(w, r, p, media)
	default:
		return newProblem(KindUnsupportedMedia, "send the items as application/json, or a payout file as text/csv or "+mediaXLSX)
	}
	dir, err := os.MkdirTemp(s.cfg.Staging, "payout-api-batch-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := "api-" + s.cfg.Now().UTC().Format("20060102T150405Z")
	in, path, err := readCreate(r.Context(), r.Body, dir, s.cfg.MaxItems, name)
	if err != nil {
		return err
	}
	opts, err := s.loadOptions(in, p)
	if err != nil {
		return err
	}
	res, err := s.cfg.Loader.LoadFile(r.Context(), path, opts)
	if err != nil && !errors.Is(err, loader.ErrRefused) {
		return err
	}
	return s.answerCreate(w, r, in, res)
}

// loadOptions are the server's load options for a create of items: the
// create's (createOptions), a dry run when an item's shape is already
// refused. The pay-date column (--pay-date-column) is an info name of the
// items: where no item gives it, the items have no pay date of their own
// (a file without that column is refused instead: it was meant to have
// one).
func (s *Server) loadOptions(in *intake, p access.Principal) (loader.Options, error) {
	opts, err := s.createOptions(p, in.control(), in.req.ReleaseAt)
	opts.DryRun = len(in.problems) > 0
	if c := opts.File.PayDateColumn; c != "" && !slices.ContainsFunc(in.info, func(k string) bool { return payfile.SameColumn(k, c) }) {
		opts.File.PayDateColumn = ""
	}
	return opts, err
}

// createOptions are the server's load options for a create, of items or
// of a file: loaded by the token, all-or-nothing, checked against the
// request's control totals ctl (nil: none), released at releaseAt ("":
// at once; checked by the loader's release rules).
func (s *Server) createOptions(p access.Principal, ctl *Control, releaseAt string) (loader.Options, error) {
	opts := s.cfg.Load
	opts.Approval.By = p.Name
	opts.DryRun, opts.Partial = false, false
	opts.Release.At = releaseAt
	opts.Expect = loader.Control{Source: "the request"}
	if ctl == nil {
		return opts, nil
	}
	opts.Expect.Rows = ctl.ExpectRows
	if ctl.ExpectTotal != "" {
		t, err := money.Parse(ctl.ExpectTotal, 8)
		if err != nil {
			return opts, badRequest("expectTotal %q: %v (a decimal string, as \"98350.50\")", ctl.ExpectTotal, err)
		}
		opts.Expect.Total = t
	}
	return opts, nil
}

// answerCreate answers a load: 201 and the batch, 200 and the batch
// loaded before, 409 while another loader loads it, 422 with the errors.
func (s *Server) answerCreate(w http.ResponseWriter, r *http.Request, in *intake, res loader.Result) error {
	errs := append(in.problems, itemErrors(res.Errors)...)
	if len(errs) > 0 {
		slices.SortStableFunc(errs, byIndex)
		return refused(fmt.Sprintf("%d problems in %d items; nothing was loaded", len(errs), in.req.Items), errs)
	}
	return s.answerLoaded(w, r, res, in.control(), "items")
}

// refused is the 422 of a create refused for errs (listed up to
// maxListed, the rest counted).
func refused(detail string, errs []ItemError) error {
	prob := newProblem(KindRefusedItems, detail)
	if len(errs) > maxListed {
		prob.More, errs = len(errs)-maxListed, errs[:maxListed]
	}
	prob.Errors = errs
	return prob
}

// answerLoaded answers a load that listed no error, of items or of a file
// (what): 201 and the batch, 200 and the batch loaded before, 409 while
// another loader loads the same, 422 when nothing was loaded.
func (s *Server) answerLoaded(w http.ResponseWriter, r *http.Request, res loader.Result, ctl *Control, what string) error {
	switch {
	case res.Busy:
		return newProblem(KindBusy, "another loader is loading the same "+what+" right now; retry in a moment")
	case res.DuplicateOf != nil:
		return s.answerBatch(w, r, res.DuplicateOf.ID, http.StatusOK, res, ctl)
	case !res.Loaded:
		return newProblem(KindRefusedItems, "nothing was loaded")
	}
	return s.answerBatch(w, r, res.Batch, http.StatusCreated, res, ctl)
}

// control is the request's control totals (nil: none given).
func (in *intake) control() *Control {
	if in.req.ExpectRows > 0 || in.req.ExpectTotal != "" {
		return &Control{ExpectRows: in.req.ExpectRows, ExpectTotal: in.req.ExpectTotal}
	}
	return nil
}

// answerBatch answers the batch id as it now stands.
func (s *Server) answerBatch(w http.ResponseWriter, r *http.Request, id string, status int, res loader.Result, ctl *Control) error {
	d, err := s.cfg.Console.Batch(r.Context(), id)
	if err != nil {
		return err
	}
	b := batchOf(d)
	b.Warnings = res.Warnings
	b.Control = ctl
	if status == http.StatusCreated {
		w.Header().Set("Location", batchPath(id))
	}
	return writeJSON(w, status, b)
}

func byIndex(a, b ItemError) int {
	ai, bi := -1, -1
	if a.Index != nil {
		ai = *a.Index
	}
	if b.Index != nil {
		bi = *b.Index
	}
	return ai - bi
}

// fieldOf is the item field of a file column.
var fieldOf = map[string]string{
	payfile.ColExternalID: "externalId", payfile.ColAmount: "amount", payfile.ColCardNumber: "destination.cardNumber",
	payfile.ColTelecomOperator: "destination.telecomOperator", payfile.ColPhoneNumber: "destination.phoneNumber",
	payfile.ColumnRow: "",
}

// itemErrors maps the loader's errors of the CSV back to the items: line
// N is item N-2 (line 1 is the header); a header or file problem is the
// request's.
func itemErrors(errs []payfile.Error) []ItemError {
	out := make([]ItemError, 0, len(errs))
	for _, e := range errs {
		ie := ItemError{Detail: e.Message}
		f, known := fieldOf[e.Column]
		switch {
		case e.Column == payfile.ColumnHeader || e.Column == payfile.ColumnFile || e.Line < 2:
			ie.Field = "items"
			if e.Column != payfile.ColumnHeader && e.Column != payfile.ColumnFile {
				ie.Field = e.Column
				if e.Column == loader.ColumnRelease {
					ie.Field = "releaseAt"
				}
			}
		case known:
			i := e.Line - 2
			ie.Index, ie.Field = &i, f
		default:
			i := e.Line - 2
			ie.Index, ie.Field = &i, "info."+e.Column
		}
		out = append(out, ie)
	}
	return out
}
