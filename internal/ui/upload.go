package ui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Uploads takes payout files uploaded in the UI: Preview validates one
// exactly as the spool would and keeps it, unloaded, in a staging
// directory of its own named by its content hash and a random part;
// Confirm loads the kept file of that ID (never a new upload).
type Uploads interface {
	Preview(ctx context.Context, u Upload) (Preview, error)
	Confirm(ctx context.Context, hash, by string) (Preview, error)
}

// Upload is one file sent with the upload form.
type Upload struct {
	Name string // base name as sent by the browser
	Data []byte
	By   string // the signed-in user
	// ExpectRows and ExpectTotal are the control totals typed in the
	// form (0 and "": none), checked like a NAME.ctl.
	ExpectRows  int
	ExpectTotal string
}

// Preview is the validation of an upload (or, from Confirm, its load).
type Preview struct {
	Hash   string // staging ID, the content hash and a random part: what Confirm takes
	File   string
	Batch  string
	Rows   int // data rows
	Valid  int
	Total  string // sum of the valid rows
	Errors []UploadError
	// Warnings refuse nothing (for example: no operator dictionary).
	Warnings []string
	// Acceptable: the file can be confirmed (every row valid, no
	// duplicate, the declared totals matched).
	Acceptable bool
	// Loaded (from Confirm): the batch was registered; Held says why it
	// waits for approval ("" when it went to the workers).
	Loaded bool
	Held   string
	Note   string // a message about the whole file (a duplicate, ...)
}

// UploadError is one error of an upload, where it is.
type UploadError struct {
	Line    int
	Cell    string // a workbook's sheet and cell ("Sheet1!C14"), if any
	Column  string
	Message string
}

// DefaultUploadLimit bounds an uploaded file when Config.UploadLimit is 0.
const DefaultUploadLimit = 20 << 20

// uploadPath is exempt from the general body limit; it has its own.
const uploadPath = "/batches/upload"

var hashPattern = regexp.MustCompile(`^[0-9a-f]{64}-[0-9a-f]{16}$`)

func (h *batchHandlers) upload(w http.ResponseWriter, r *http.Request) {
	if h.readOnly || h.uploads == nil {
		h.guardPost(w, r, h.uploads != nil) // refuses without reading the file
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.uploadLimit+64<<10)
	if err := r.ParseMultipartForm(8 << 20); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("file too large: at most %d bytes", h.uploadLimit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "bad upload form", http.StatusBadRequest)
		return
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	if !h.guardPost(w, r, h.uploads != nil) {
		return
	}
	u, err := readUpload(r, h.uploadLimit)
	if err != nil {
		h.render(w, r, http.StatusBadRequest, resultPage{Title: "Upload", Message: err.Error(), Refused: true})
		return
	}
	p, err := h.uploads.Preview(r.Context(), u)
	h.preview(w, r, "Preview of "+p.File, p, err)
}

// readUpload reads the form's file and control totals.
func readUpload(r *http.Request, limit int64) (Upload, error) {
	f, hdr, err := r.FormFile("file")
	if err != nil {
		return Upload{}, errors.New("choose a CSV or XLSX file to upload")
	}
	defer f.Close()
	if hdr.Size > limit {
		return Upload{}, fmt.Errorf("file too large: at most %d bytes", limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return Upload{}, fmt.Errorf("read the upload: %w", err)
	}
	if int64(len(data)) > limit {
		return Upload{}, fmt.Errorf("file too large: at most %d bytes", limit)
	}
	u := Upload{Name: filepath.Base(strings.ReplaceAll(hdr.Filename, `\`, "/")), Data: data, By: userFrom(r.Context()),
		ExpectTotal: strings.TrimSpace(r.PostFormValue("expect_total"))}
	if s := strings.TrimSpace(r.PostFormValue("expect_rows")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return u, fmt.Errorf("expected rows %q: want a positive whole number", s)
		}
		u.ExpectRows = n
	}
	return u, nil
}

func (h *batchHandlers) confirm(w http.ResponseWriter, r *http.Request) {
	if !h.guardPost(w, r, h.uploads != nil) {
		return
	}
	hash := r.PostFormValue("hash")
	if !hashPattern.MatchString(hash) {
		http.Error(w, "bad upload hash", http.StatusBadRequest)
		return
	}
	p, err := h.uploads.Confirm(r.Context(), hash, userFrom(r.Context()))
	h.preview(w, r, "Load of "+p.File, p, err)
}

// preview answers an upload or a confirm with the file's figures and
// errors: 200, 409 when refused, 503 for any other error.
func (h *batchHandlers) preview(w http.ResponseWriter, r *http.Request, title string, p Preview, err error) {
	code, page := http.StatusOK, resultPage{Title: title, Preview: &p}
	switch {
	case errors.Is(err, ErrRefused):
		code, page.Message, page.Refused, page.Preview = http.StatusConflict, err.Error(), true, nil
	case err != nil:
		h.log.Error().Err(err).Str("path", r.URL.Path).Msg("ui: upload failed")
		code, page.Message, page.Refused, page.Preview = http.StatusServiceUnavailable, "not done: the ledger or the spool is unavailable (see the UI's log)", true, nil
	}
	h.render(w, r, code, page)
}
