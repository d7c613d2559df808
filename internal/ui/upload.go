package ui

import (
	"context"
	"crypto/hmac"

	"errors"
	"fmt"
	"github.com/acme/payout/internal/access"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
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
	// Preview streams u.File into the staging directory; an error reading
	// it (ErrUploadTooLarge) is returned wrapped (%w), with nothing left
	// staged.
	Preview(ctx context.Context, u Upload) (Preview, error)
	// Confirm loads with the file choices f of the preview.
	Confirm(ctx context.Context, hash, by string, f FileChoices) (Preview, error)
}

// FileChoices are how the upload form says to read a file, as payout
// load --amount-format and --sheet do ("": as the UI is configured).
type FileChoices struct {
	AmountFormat string
	Sheet        string
}

// Upload is one file sent with the upload form.
type Upload struct {
	Name string // base name as sent by the browser
	// File streams the file's bytes from the request: read once, it
	// fails (ErrUploadTooLarge) past the upload limit.
	File io.Reader
	By   string // the signed-in user
	// ExpectRows and ExpectTotal are the control totals typed in the
	// form (0 and "": none), checked like a NAME.ctl.
	ExpectRows  int
	ExpectTotal string
	// ReleaseAt is the release time typed in the form ("": at once),
	// written to the upload's NAME.ctl as release= and read as a control
	// file's (payout load --release-at).
	ReleaseAt string
	// The form's amount format and sheet.
	FileChoices
}

// Preview is the validation of an upload (or, from Confirm, its load).
type Preview struct {
	Hash  string // staging ID, the content hash and a random part: what Confirm takes
	File  string
	Batch string
	Rows  int // data rows
	// SheetRead is the sheet read of a workbook ("" for CSV), and Shown
	// the data rows it shows of Rows (hidden and filtered-out rows are
	// not). FileChoices.Sheet is the sheet the form asked for.
	SheetRead string
	Shown     int
	Valid     int
	Total     string // sum of the valid rows
	Errors    []UploadError
	// Warnings refuse nothing (for example: no operator dictionary).
	Warnings []string
	// LocaleAmounts counts the amounts refused that look written in
	// another locale's format: the page says once, above the errors, to
	// choose the format in the upload form (not a flag, not on each row).
	LocaleAmounts int
	// Acceptable: the file can be confirmed (every row valid, no
	// duplicate, the declared totals matched).
	Acceptable bool
	// Loaded (from Confirm): the batch was registered; Held says why it
	// waits for approval ("" when it went to the workers).
	Loaded bool
	Held   string
	Note   string // a message about the whole file (a duplicate, ...)
	// LoadedAs is the batch that already holds the same content (a file
	// uploaded again): nothing to correct, nothing to load.
	LoadedAs string
	// What the file was read with: the form's choices and control
	// totals, as applied (ExpectRows 0 and ExpectTotal "": none).
	FileChoices
	ExpectRows  int
	ExpectTotal string
	// ChoicesMAC binds the choices to this preview in the confirm form
	// (set by the UI).
	ChoicesMAC string
	// Sample is the first rows of the file as they were parsed (at most
	// PreviewRows), destinations masked; InfoColumns names the file's
	// informational columns, whose values each row's Info holds.
	Sample      []PreviewRow
	InfoColumns []string
	// ExtraColumns names the further destination properties (phoneNumber,
	// bankName...) of the sample's rows, whose values each row's Extra
	// holds.
	ExtraColumns []string
	// After says what Confirm will do with the file: loaded, then waiting
	// for approval under the rule that applies, or handed to the workers
	// at once.
	After string
}

// PreviewRows bounds the rows a preview shows as parsed.
const PreviewRows = 10

// PreviewRow is a row of an uploaded file as it was parsed.
type PreviewRow struct {
	Line        int
	ExternalID  string
	Amount      string // with the file's decimals
	Destination string // masked: "card 411111******1111", "telecom MTS"
	Info        []string
	Extra       []InfoValue
}

// Prop is the row's value of destination property col ("" when absent).
func (r PreviewRow) Prop(col string) string { return propValue(r.Extra, col) }

// UploadError is one error of an upload, where it is.
type UploadError struct {
	Line    int
	Cell    string // a workbook's sheet and cell ("Sheet1!C14"), if any
	Column  string
	Message string
}

// DefaultUploadLimit bounds an uploaded file when Config.UploadLimit is 0.
const DefaultUploadLimit = 20 << 20

// DefaultMaxUploads bounds the uploads handled at once when
// Config.MaxUploads is 0.
const DefaultMaxUploads = 2

// ErrUploadTooLarge is the read error of Upload.File past the limit.
var ErrUploadTooLarge = errors.New("file too large")

// uploadPath is exempt from the general body limit; it has its own.
const uploadPath = "/batches/upload"

// The upload form's other fields, each at most maxFieldBytes, come before
// the file (as the form sends them): the CSRF token is checked and the
// control totals are known before a byte of the file is staged.
const (
	maxFieldBytes = 1 << 10
	maxFormSlack  = 64 << 10 // the request beyond the file: part headers, fields
)

// uploadRetryAfter is the Retry-After of an upload refused because the
// others use every slot.
const uploadRetryAfter = "5"

var hashPattern = regexp.MustCompile(`^[0-9a-f]{64}-[0-9a-f]{16}$`)

// upload streams the form's file into its staging directory (through
// Uploads.Preview), never holding it in memory or a temporary file of its
// own: past the limit it answers 413 and nothing stays staged. At most
// Config.MaxUploads run at once; one more is answered 503 with
// Retry-After.
func (h *uploadHandlers) upload(w http.ResponseWriter, r *http.Request) {
	if h.readOnly || h.uploads == nil {
		h.guardPost(w, r, h.uploads != nil) // refuses without reading the file
		return
	}
	if !h.mayTake(w, r, access.Load) { // before the file is read
		return
	}
	select {
	case h.uploadSlots <- struct{}{}:
		defer func() { <-h.uploadSlots }()
	default:
		h.log.Warn().Str("ip", clientIP(r)).Str("user", logUser(userFrom(r.Context()))).Msg("ui: upload refused, every upload slot is busy")
		w.Header().Set("Retry-After", uploadRetryAfter)
		http.Error(w, "too many uploads at once: try again in a moment", http.StatusServiceUnavailable)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.uploadLimit+maxFormSlack)
	u, fields, err := h.readUploadForm(r)
	switch {
	case errors.Is(err, errBadForm):
		http.Error(w, "bad upload form", http.StatusBadRequest)
		return
	case h.tooLarge(w, err):
		return
	case !h.csrf.valid(r, fields.Get(csrfField)):
		h.refuseForm(w, r) // the token comes before the file: nothing was staged
		return
	case err != nil:
		h.render(w, r, http.StatusBadRequest, resultPage{Title: "Upload", Message: err.Error(), Refused: true})
		return
	}
	p, err := h.uploads.Preview(r.Context(), u)
	if h.tooLarge(w, err) {
		return
	}
	if errors.Is(err, ErrFieldAfterFile) || errors.Is(err, errBadForm) {
		h.log.Warn().Err(err).Str("user", logUser(userFrom(r.Context()))).Msg("ui: upload refused, nothing staged")
		h.render(w, r, http.StatusBadRequest, resultPage{Title: "Upload", Message: err.Error(), Refused: true})
		return
	}
	h.preview(w, r, "Preview of "+p.File, p, err)
}

// tooLarge answers 413 when err is a file or request past its limit.
func (h *uploadHandlers) tooLarge(w http.ResponseWriter, err error) bool {
	var tooBig *http.MaxBytesError
	if !errors.Is(err, ErrUploadTooLarge) && !errors.As(err, &tooBig) {
		return false
	}
	http.Error(w, fmt.Sprintf("file too large: at most %d bytes", h.uploadLimit), http.StatusRequestEntityTooLarge)
	return true
}

// errBadForm: the request is not a multipart form of the upload.
var errBadForm = errors.New("bad upload form")

// readUploadForm reads the form's fields up to its file part and returns
// the upload streaming that part, with the fields read (the CSRF token
// among them). A field too long, or none, is errBadForm; a missing file
// or a bad control total is an error to show.
func (h *uploadHandlers) readUploadForm(r *http.Request) (Upload, url.Values, error) {
	fields := url.Values{}
	mr, err := r.MultipartReader()
	if err != nil {
		return Upload{}, fields, errBadForm
	}
	for range 16 {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return Upload{}, fields, errors.New("choose a CSV or XLSX file to upload")
		}
		if err != nil {
			return Upload{}, fields, errors.Join(errBadForm, err)
		}
		if part.FormName() == "file" && part.FileName() != "" {
			return uploadOf(r, part, mr, fields, h.uploadLimit)
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil || len(v) > maxFieldBytes {
			return Upload{}, fields, errors.Join(errBadForm, err)
		}
		fields.Add(part.FormName(), string(v))
	}
	return Upload{}, fields, errBadForm
}

// uploadOf is the upload of the file part, with the control totals of the
// fields before it. The file must be the form's last part: a field after
// it (a control total a client sent late) would not be checked, so
// reading the file then fails with ErrFieldAfterFile and nothing stays
// staged.
func uploadOf(r *http.Request, part *multipart.Part, mr *multipart.Reader, fields url.Values, limit int64) (Upload, url.Values, error) {
	last := func() error {
		next, err := mr.NextPart()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return errors.Join(errBadForm, err)
		}
		return fmt.Errorf("%w: the form's field %q comes after the file; send every field (control totals, token) before it", ErrFieldAfterFile, next.FormName())
	}
	u := Upload{Name: filepath.Base(strings.ReplaceAll(part.FileName(), `\`, "/")), By: userFrom(r.Context()),
		File: &limitedFile{r: part, left: limit, end: last}, ExpectTotal: strings.TrimSpace(fields.Get("expect_total")),
		ReleaseAt:   strings.TrimSpace(fields.Get("release_at")),
		FileChoices: FileChoices{AmountFormat: strings.TrimSpace(fields.Get("amount_format")), Sheet: strings.TrimSpace(fields.Get("sheet"))}}
	if s := strings.TrimSpace(fields.Get("expect_rows")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return u, fields, fmt.Errorf("expected rows %q: want a positive whole number", s)
		}
		u.ExpectRows = n
	}
	return u, fields, nil
}

// ErrFieldAfterFile is the error of an upload form with a field after its
// file part.
var ErrFieldAfterFile = errors.New("upload form field after the file")

// limitedFile reads r and fails with ErrUploadTooLarge once more than
// left bytes came from it; at r's end it returns end's error, if any,
// instead of io.EOF.
type limitedFile struct {
	r    io.Reader
	left int64
	end  func() error
}

func (l *limitedFile) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return 0, ErrUploadTooLarge
	}
	var tooBig *http.MaxBytesError
	if err != nil && !errors.Is(err, io.EOF) && !errors.As(err, &tooBig) {
		// The request broke off (the client went away, a proxy cut it,
		// the read deadline passed): the client's fault, not the spool's.
		return n, fmt.Errorf("%w: the upload broke off before the end of the file (%v); send it again", errBadForm, err)
	}
	if errors.Is(err, io.EOF) && l.end != nil {
		if e := l.end(); e != nil {
			return n, e
		}
	}
	return n, err
}

func (h *uploadHandlers) confirm(w http.ResponseWriter, r *http.Request) {
	hash, ok := h.formTarget(w, r, h.uploads != nil, "upload hash", hashPattern, func(r *http.Request) string { return r.PostFormValue("hash") })
	if !ok {
		return
	}
	f := FileChoices{AmountFormat: r.PostFormValue("amount_format"), Sheet: r.PostFormValue("sheet")}
	if !hmac.Equal([]byte(r.PostFormValue("choices_mac")), []byte(h.csrf.choicesMAC(userFrom(r.Context()), hash, f))) {
		http.Error(w, "the file's choices changed since its preview: upload it again", http.StatusBadRequest)
		return
	}
	p, err := h.uploads.Confirm(r.Context(), hash, userFrom(r.Context()), f)
	h.preview(w, r, "Load of "+p.File, p, err)
}

// preview answers an upload or a confirm with the file's figures and
// errors: 200, 409 when refused, 503 for any other error.
func (h *uploadHandlers) preview(w http.ResponseWriter, r *http.Request, title string, p Preview, err error) {
	p.ChoicesMAC = h.csrf.choicesMAC(userFrom(r.Context()), p.Hash, p.FileChoices)
	code, page := http.StatusOK, resultPage{Title: title, Preview: &p}
	switch {
	case errors.Is(err, ErrForbidden):
		code, page.Message, page.Refused, page.Preview = http.StatusForbidden, plainMessage(err.Error()), true, nil
	case errors.Is(err, ErrRefused):
		code, page.Message, page.Refused, page.Preview = http.StatusConflict, err.Error(), true, nil
	case err != nil:
		h.log.Error().Err(err).Str("path", r.URL.Path).Msg("ui: upload failed")
		code, page.Message, page.Refused, page.Preview = http.StatusServiceUnavailable, "not done: the ledger or the spool is unavailable (see the UI's log)", true, nil
	}
	h.render(w, r, code, page)
}
