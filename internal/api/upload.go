package api

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/payfile"
)

// The media types of a create.
const (
	mediaJSON = "application/json"
	mediaCSV  = "text/csv"
	mediaXLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
)

// extOf is the file name extension each file media type wants.
var extOf = map[string]string{mediaCSV: ".csv", mediaXLSX: ".xlsx"}

// mediaType is the request's media type, lowercased without parameters
// ("" when absent or unreadable).
func mediaType(r *http.Request) string {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

// createFromFile: POST /api/v1/batches with a CSV or XLSX payout file as
// the body and its name in ?filename=. The file takes the console
// upload's path into the loader: staged by loader.StageUpload (its name
// checked, owner-only, hashed) in a folder of its own under the staging
// folder, and loaded by Loader.LoadFile with the server's load options,
// by the token: the rules, limits, all-or-nothing, content hash and
// approval rule of a file dropped in the spool. A refusal lists every
// error with its line, column and (in a workbook) sheet and cell.
func (s *Server) createFromFile(w http.ResponseWriter, r *http.Request, p access.Principal, media string) error {
	q := r.URL.Query()
	name := q.Get("filename")
	if name == "" {
		return badRequest("give the file's name in ?filename= (NAME.csv or NAME.xlsx)")
	}
	if ext := strings.ToLower(filepath.Ext(name)); ext != extOf[media] {
		return badRequest("filename %q: a %s body wants a name ending in %s", name, media, extOf[media])
	}
	ctl, err := fileControl(q.Get("expectRows"), q.Get("expectTotal"))
	if err != nil {
		return err
	}
	opts, err := s.createOptions(p, ctl, q.Get("releaseAt"))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp(s.cfg.Staging, "payout-api-file-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	_, path, err := loader.StageUpload(dir, name, r.Body, loader.Control{})
	if errors.Is(err, loader.ErrUploadName) {
		return badRequest("filename: %v (a plain name of at most 200 printable characters, not hidden)", err)
	}
	if err != nil {
		return err
	}
	res, err := s.cfg.Loader.LoadFile(r.Context(), path, opts)
	if err != nil && !errors.Is(err, loader.ErrRefused) {
		return err
	}
	if len(res.Errors) > 0 {
		errs := fileErrors(res.Errors)
		return refused(fmt.Sprintf("%d problems in %s (%d rows); nothing was loaded", len(errs), res.File, res.Rows), errs)
	}
	return s.answerLoaded(w, r, res, ctl, "file")
}

// fileControl reads the control totals of a file create's query (nil:
// none given); createOptions checks the total.
func fileControl(rows, total string) (*Control, error) {
	if rows == "" && total == "" {
		return nil, nil
	}
	c := &Control{ExpectTotal: total}
	if rows != "" {
		n, err := strconv.Atoi(rows)
		if err != nil || n < 1 {
			return nil, badRequest("expectRows %q: a positive whole number", rows)
		}
		c.ExpectRows = n
	}
	return c, nil
}

// fileErrors are the loader's errors of an uploaded file, as the file
// names them: line, column, and in a workbook sheet and cell.
func fileErrors(errs []payfile.Error) []ItemError {
	out := make([]ItemError, 0, len(errs))
	for _, e := range errs {
		out = append(out, ItemError{Line: e.Line, Column: e.Column, Sheet: e.Sheet, Cell: e.Cell, Detail: e.Message})
	}
	return out
}
