// Package payfile reads and validates payout files, CSV files and XLSX
// workbooks alike: the rules of a row over two readers, a CSV reader and a
// streaming, bounded XLSX reader of its own.
//
// The XLSX reader (xlsx.go, xlsxpkg.go, xlsxsheet.go, numfmt.go) reads the
// shared strings, the styles and one sheet straight from the ZIP, without
// excelize, every part and cell size bounded against hostile workbooks.
//
// A payout file has a header row naming its columns: externalId, amount and
// one destination per row, either cardNumber or telecomOperator, plus the
// optional extra destination properties allowed by name (Options.ExtraColumns,
// default phoneNumber). Header names are matched ignoring case, spaces, '-'
// and '_' ("External ID", "external_id" and "EXTERNAL-ID" all mean
// externalId). A column of any other name is informational (Row.Info):
// kept for the result file, never sent to the PSP, unless its name is a
// near miss of a known one, which is refused with "did you mean". A card
// number in any field but cardNumber refuses its row (cardscan.go), and
// externalIds are compared by extid.Key (case and Unicode form ignored).
// Title rows above a CSV header are skipped. The delimiter is ',' or ';',
// detected from the first line holding one.
// The text is UTF-8 with or without a byte order mark, with LF or CRLF line
// ends; spaces around every field are trimmed.
//
// Reading is streaming and happens in two passes, so that a file of any
// number of rows is validated in bounded memory:
//
//   - [Check] validates the whole file and reports every problem to a
//     callback as an [Error] ("FILE:LINE: column: message", LINE being the
//     physical line in the file). Its [Summary] lists the lines of the bad
//     rows. Duplicate externalIds are found with one 64-bit hash per row and
//     confirmed by a second read of the file, so a hash collision never
//     produces a false error.
//   - [Each] reads the file again and hands every valid row to a callback,
//     skipping the lines the caller chooses (normally Summary.BadLines).
//
// Full card numbers never appear in an Error: they are masked with
// card.Mask, and every message goes through card.Scrub as a last defence.
package payfile

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/card"
	"github.com/acme/payout/internal/extid"
	"github.com/acme/payout/internal/money"
)

// Defaults of Options.
const (
	DefaultMaxExternalIDLen = 64
	DefaultMaxLineBytes     = 64 << 10
)

// DefaultExtraColumns are the extra destination properties allowed when
// Options.ExtraColumns is nil.
var DefaultExtraColumns = []string{ColPhoneNumber}

// Canonical names of the fixed columns, as they appear in errors. They
// belong to the file format; the PSP's property keys of a destination
// happen to be the same words (psp.KeyCardNumber, a test checks it).
const (
	ColExternalID      = "externalId"
	ColAmount          = "amount"
	ColCardNumber      = "cardNumber"
	ColTelecomOperator = "telecomOperator"
	// ColReason is read and ignored: the failed-only retry file
	// (payout report --failed-only) tells finance in it why each payout
	// failed, and the file loads as it is. Nothing of it is sent.
	ColReason      = "reason"
	ColPhoneNumber = "phoneNumber"
)

// Error.Column values used when no single column applies.
const (
	// ColumnHeader: a problem of the header row; the file is refused.
	ColumnHeader = "header"
	// ColumnRow: a problem of a data row as a whole (destinations, field
	// count, quotes); the row is refused.
	ColumnRow = "row"
	// ColumnFile: a problem that stops reading the file (encoding, a line
	// or record over the size bound, no data); the file is refused.
	ColumnFile = "file"
)

// ErrBadOptions is matched by the error returned for unusable Options.
var ErrBadOptions = errors.New("payfile: invalid options")

// ErrFileChanged is returned when the second read of a file (to confirm
// duplicate externalIds) does not see the same rows as the first.
var ErrFileChanged = errors.New("payfile: file changed while being validated")

// Options tune validation. The zero value is usable.
type Options struct {
	// Scale is the number of decimal places an amount may have. 0 means
	// money.DefaultScale (2); a negative value means whole units only.
	Scale int
	// MaxAmount refuses amounts above it; the zero Amount means
	// money.DefaultMax of the scale. It may not pass money.Ceiling of the
	// scale, which also bounds the file's total: a row that takes the
	// total over it is refused (KindTotal) and with it the file.
	MaxAmount money.Amount
	// MaxExternalIDLen bounds the length of an externalId in characters;
	// 0 means DefaultMaxExternalIDLen.
	MaxExternalIDLen int
	// ExtraColumns are the extra destination properties a file may carry,
	// by canonical name (they become psp.Property keys). nil means
	// DefaultExtraColumns; an empty non-nil slice allows none.
	ExtraColumns []string
	// MaxLineBytes bounds a physical line, and a record spanning several
	// lines, in bytes; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// AmountFormat is how the file writes its amounts (decimal and
	// thousands separators); the zero value is money.Plain (1500.50). It is
	// declared by the caller, never guessed from the file.
	AmountFormat money.Format
	// TelecomOperators, when set, refuses a telecomOperator that is not
	// one of its names (matched exactly once trimmed; a near miss gets a
	// "did you mean"). When nil, operators are not checked and Summary
	// has a warning saying so for a file that has any.
	TelecomOperators *Dictionary
	// BankNames, when set, allows a bankName column (an extra destination
	// property) and refuses a bankName that is not one of its names.
	BankNames *Dictionary
	// Sheet is the sheet read from an XLSX workbook; "" means the first
	// one not hidden.
	Sheet string
	// IncludeHiddenRows takes a workbook's hidden rows, rows filtered out
	// by an autofilter, hidden columns and a hidden sheet as if shown;
	// by default they are refused, since they would be paid unseen.
	IncludeHiddenRows bool
	// CardPrefixes chooses which runs of digits outside the cardNumber
	// column are taken for a card number (see cardscan.go); the zero value
	// is CardPrefixesIIN.
	CardPrefixes CardPrefixes
	// PayDateColumn names the informational column that holds a row's
	// own pay date (payout load --pay-date-column, matched as header names
	// are): its value is kept as information, as before, and also given
	// as Row.PayDate, for the loader to schedule the row by. "": none.
	PayDateColumn string
}

// Decimals is the number of decimal places amounts read with o are shown
// and registered with: money.DefaultScale for Scale 0, none for a
// negative Scale (whole units only), else Scale.
func (o Options) Decimals() int {
	switch {
	case o.Scale == 0:
		return money.DefaultScale
	case o.Scale < 0:
		return 0
	}
	return o.Scale
}

// Kind classifies an Error. A Kind is itself an error, so that
// errors.Is(err, payfile.KindDuplicate) works on an Error.
type Kind int

// The kinds of problems.
const (
	// KindHeader: missing, unknown, unnamed, repeated or too many columns.
	KindHeader Kind = iota + 1
	// KindField: a value is invalid (externalId, amount, card number,
	// telecom operator, extra property) or a row has no or two destinations.
	KindField
	// KindDuplicate: an externalId already used earlier in the file.
	KindDuplicate
	// KindEncoding: the file is not UTF-8 text (invalid UTF-8, NUL or other
	// control bytes, UTF-16).
	KindEncoding
	// KindStructure: the CSV structure is broken (field count, quotes, a
	// row spanning lines, a repeated header, a line or record too long).
	// Record boundaries near such an error are doubtful: a cautious caller
	// refuses the whole file rather than loading the other rows.
	KindStructure
	// KindEmpty: the file is empty or has a header but no data rows.
	KindEmpty
	// KindTotal: the row takes the file's total over the largest sum the
	// ledger counts exactly (money.Ceiling); the file is refused whole.
	KindTotal
	// KindLimit: the row is over a limit the ledger keeps across files
	// (the recipient velocity limit, --velocity-action refuse).
	KindLimit
)

func (k Kind) String() string {
	switch k {
	case KindHeader:
		return "header"
	case KindField:
		return "field"
	case KindDuplicate:
		return "duplicate"
	case KindEncoding:
		return "encoding"
	case KindStructure:
		return "structure"
	case KindEmpty:
		return "empty"
	case KindTotal:
		return "total"
	case KindLimit:
		return "limit"
	}
	return "unknown"
}

// Error makes a Kind usable as an errors.Is target.
func (k Kind) Error() string { return "payfile: " + k.String() + " problem" }

// Error is one problem found in a payout file.
type Error struct {
	File    string // as given to Check or Each (callers usually pass the base name)
	Line    int    // physical line in the file, from 1; a workbook's row number
	Sheet   string // a workbook's sheet, quoted as a spreadsheet does if need be; "" for CSV
	Cell    string // a workbook's cell ("C14") when the error is of one cell
	Column  string // canonical column name, or ColumnHeader, ColumnRow, ColumnFile
	Kind    Kind
	Message string // card numbers masked
	// LocaleAmount: an amount refused under the plain format that looks
	// written as another locale writes it ("1 500,50"). The message says
	// what is wrong with it; how to declare the file's amount format is
	// for the caller to say once (Summary.LocaleAmounts), in its own terms
	// (a command's flag, a form's choice), not on every row.
	LocaleAmount bool
}

// String formats the error compiler style: "FILE:LINE: column: message",
// or for a workbook "FILE:SHEET!CELL: column: message", CELL being the
// row number alone when no single cell is at fault
// ("payouts.xlsx:Sheet1!C14: amount: ..." and "payouts.xlsx:Sheet1!14: row: ...").
func (e Error) String() string {
	if e.Sheet != "" {
		pos := e.Cell
		if pos == "" {
			pos = strconv.Itoa(e.Line)
		}
		return fmt.Sprintf("%s:%s!%s: %s: %s", e.File, e.Sheet, pos, e.Column, e.Message)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Column, e.Message)
}

// Error is String, so that an Error can be returned as an error.
func (e Error) Error() string { return e.String() }

// Is matches the Error's Kind.
func (e Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && k == e.Kind
}

// SortErrors orders errors by line, keeping the order of errors of one line.
// Check reports duplicate externalIds after all other errors; a listing for
// people is sorted with this.
func SortErrors(errs []Error) {
	slices.SortStableFunc(errs, func(a, b Error) int { return a.Line - b.Line })
}

// WriteErrors writes one error per line in String form.
func WriteErrors(w io.Writer, errs []Error) error {
	for _, e := range errs {
		if _, err := io.WriteString(w, e.String()+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Row is a valid payout row.
type Row struct {
	Line            int // physical line where the row starts
	ExternalID      string
	Amount          money.Amount
	CardNumber      string     // normalized digits, or ""
	TelecomOperator string     // or ""
	Extra           []Property // the extra destination properties, in column order
	// Info holds the values of the file's informational columns
	// (Summary.Info), in that order, as written; nil when all are empty.
	// They are carried into the result file, never sent to the PSP.
	Info []string
	// PayDate is the row's value in Options.PayDateColumn, as written
	// ("": none); the loader parses and checks it.
	PayDate string
}

// Destination is a display form of the destination with the card masked:
// "card 411111******1111" or "telecom MTS".
func (r Row) Destination() string {
	if r.CardNumber != "" {
		return "card " + card.Mask(r.CardNumber)
	}
	return "telecom " + r.TelecomOperator
}

// Property is one extra destination property of a row: its column's
// canonical name and the value (phoneNumber, +7 916 ...). The loader stores
// the row's list as JSON ({"key": ..., "value": ...}), which is also the
// shape of the PSP's order properties (psp.Property), so the workers send
// it as it is.
type Property struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Summary is the outcome of Check.
type Summary struct {
	Rows      int          // data rows (blank rows not counted)
	ValidRows int          // rows without any error
	Total     money.Amount // sum of the amounts of the valid rows
	// BadLines are the starting lines of the rows with errors, ascending;
	// len(BadLines) == Rows - ValidRows. Pass it to Each through IsBad.
	BadLines []int
	// Aborted is set when the file as a whole is refused (header problem,
	// encoding, a line or record over the bound, no data rows). Rows after
	// the point of failure were not read.
	Aborted   bool
	Errors    int      // number of errors reported
	Delimiter rune     // ',' or ';'
	Columns   []string // canonical names of the file's columns, in file order
	// HiddenRows are the data rows of a workbook's sheet that it does not
	// show (hidden, or filtered out): of Rows, Rows-HiddenRows are shown.
	HiddenRows int
	// Info names the informational columns (any column of a name not
	// known, kept beside its row in the result file), in file order.
	Info []string
	// HeaderLine is the line of the header row: above 1 when title rows
	// were skipped (a warning says so).
	HeaderLine int
	Sheet      string // the sheet read, for a workbook
	// LocaleAmounts counts the errors with LocaleAmount set: amounts
	// that look written in another locale's format, which the caller
	// answers once with how to declare it (see AmountFormatHint).
	LocaleAmounts int
	// Warnings are said once per file and refuse nothing: a check that
	// could not be made (no operator dictionary given, say).
	Warnings []string
}

// WarnNoOperatorDictionary is the warning of a file with telecom operators
// checked without an operator dictionary.
const WarnNoOperatorDictionary = ColTelecomOperator + ": the operators are not checked against the PSP's dictionary (give it with --telecom-operators FILE): a misspelt one (Mts, MTS-Russia) is refused only by the PSP, at payout time"

// AmountFormatHint is said once for a file with LocaleAmounts n > 0 by a
// command: how to declare the file's amount format with how, the flag
// ("--amount-format").
func AmountFormatHint(n int, how string) string {
	verb := "look"
	if n == 1 {
		verb = "looks"
	}
	return fmt.Sprintf("%s %s written as another locale writes amounts, not plain (1500.50): declare the file's amount format with %s %s",
		plural(n, "amount"), verb, how, LocaleFormats())
}

// IsBad reports whether line is in BadLines; it suits Each's skip.
func (s Summary) IsBad(line int) bool {
	_, found := slices.BinarySearch(s.BadLines, line)
	return found
}

// Check validates a payout file in one streaming pass, reporting every
// problem to onError, and returns the summary. Duplicate externalIds are
// confirmed by a second read of r (from its position at the call), and
// reported after the other errors (see SortErrors). The returned error is
// only for I/O failures, ctx, unusable options or a file that changed
// between the two reads; validation problems go to onError.
//
// Memory does not grow with the file beyond 8 bytes per row (the hashes),
// plus one int per bad row and, only when hashes collide, the externalIds
// of the colliding rows. onError may be nil.
func Check(ctx context.Context, name string, r io.ReadSeeker, opts Options, onError func(Error)) (Summary, error) {
	return CheckEach(ctx, name, r, opts, onError, nil)
}

// CheckEach is Check that also hands each row to onRow as soon as the row
// is found valid on its own, so that a caller can work on the rows (look
// up their externalIds, say) during the same read. A row handed to onRow
// may still turn out to repeat an earlier externalId: its line is then in
// Summary.BadLines, which stays the final word. An error from onRow stops
// the check and is returned, wrapped. onRow may be nil.
func CheckEach(ctx context.Context, name string, r io.ReadSeeker, opts Options, onError func(Error), onRow func(Row) error) (Summary, error) {
	seed := maphash.MakeSeed()
	return check(ctx, name, r, opts, onError, onRow, func(s string) uint64 { return maphash.String(seed, s) })
}

// Collect runs Check and returns the errors sorted by line.
func Collect(ctx context.Context, name string, r io.ReadSeeker, opts Options) (Summary, []Error, error) {
	return CollectEach(ctx, name, r, opts, nil)
}

// CollectEach runs CheckEach and returns the errors sorted by line.
func CollectEach(ctx context.Context, name string, r io.ReadSeeker, opts Options, onRow func(Row) error) (Summary, []Error, error) {
	var errs []Error
	sum, err := CheckEach(ctx, name, r, opts, func(e Error) { errs = append(errs, e) }, onRow)
	SortErrors(errs)
	return sum, errs, err
}

// Each reads a payout file again and calls fn for every valid row, in file
// order, except the rows whose starting line skip reports (skip may be nil).
// It does not look for duplicate externalIds: run Check first and skip its
// BadLines. A row that is not valid and not skipped stops Each with its
// first Error as the error; so does a file-level problem. An error from fn
// stops Each and is returned as is.
func Each(ctx context.Context, name string, r io.Reader, opts Options, skip func(line int) bool, fn func(Row) error) error {
	cfg, err := opts.configFor(name)
	if err != nil {
		return err
	}
	var fileErr *Error
	emit := func(e Error) {
		if fileErr == nil {
			e = finish(name, e)
			fileErr = &e
		}
	}
	res, err := scan(ctx, r, cfg, emit, func(rec *record) error {
		if skip != nil && skip(rec.Line) {
			return nil
		}
		var rowErr *Error
		row, ok, _ := cfg.validate(rec, func(e Error) {
			if rowErr == nil {
				e = finish(name, e)
				rowErr = &e
			}
		})
		if !ok {
			return *rowErr
		}
		return fn(row)
	})
	if err != nil {
		return err
	}
	if res.aborted && fileErr != nil {
		return *fileErr
	}
	return nil
}

// finish completes an error for the caller: file name, scrubbed message.
func finish(name string, e Error) Error {
	e.File = name
	e.Message = card.Scrub(e.Message)
	return e
}

// check is Check with the externalId hash given, so that tests can force
// collisions.
func check(ctx context.Context, name string, r io.ReadSeeker, opts Options, onError func(Error), onRow func(Row) error, hash func(string) uint64) (Summary, error) {
	c := &checker{name: name, r: r, hash: hash, sum: Summary{Total: money.Zero}}
	var err error
	if c.cfg, err = opts.configFor(name); err != nil {
		return c.sum, err
	}
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return c.sum, fmt.Errorf("payfile: %s: %w", name, err)
	}
	if onError == nil {
		onError = func(Error) {}
	}
	c.emit = func(e Error) {
		c.sum.Errors++
		if e.LocaleAmount {
			c.sum.LocaleAmounts++
		}
		onError(finish(name, e))
	}
	hashes, err := c.validateRows(ctx, onRow)
	if err != nil || c.sum.Aborted {
		// After an abort the rows after the failure are unknown:
		// duplicates are not looked for, the file is refused anyway.
		return c.sum, err
	}
	collided := collisions(hashes)
	hashes = nil
	if collided == nil {
		return c.sum, nil
	}
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return c.sum, fmt.Errorf("payfile: %s: %w", name, err)
	}
	return c.sum, c.findDuplicates(ctx, collided)
}

// checker is one Check of a file.
type checker struct {
	name string
	r    io.ReadSeeker
	cfg  *config
	emit func(Error) // counts and reports an error
	hash func(string) uint64
	sum  Summary
}

// validateRows is pass 1: validate every row, remember the hash of every
// well-formed externalId (8 bytes a row).
func (c *checker) validateRows(ctx context.Context, onRow func(Row) error) ([]uint64, error) {
	var hashes []uint64
	sawTelecom := false
	res, err := scan(ctx, c.r, c.cfg, c.emit, func(rec *record) error {
		c.sum.Rows++
		sawTelecom = sawTelecom || rec.Telecom != ""
		row, ok, idOK := c.cfg.validate(rec, c.emit)
		if idOK {
			hashes = append(hashes, c.hash(extid.Key(row.ExternalID)))
		}
		if !ok {
			c.sum.BadLines = append(c.sum.BadLines, rec.Line)
			return nil
		}
		if !c.addTotal(&c.sum.Total, rec, row.Amount, c.emit) {
			c.sum.BadLines = append(c.sum.BadLines, rec.Line)
			return nil
		}
		c.sum.ValidRows++
		if onRow != nil {
			return onRow(row)
		}
		return nil
	})
	if sawTelecom && c.cfg.telecom == nil {
		c.sum.Warnings = append(c.sum.Warnings, WarnNoOperatorDictionary)
	}
	c.sum.Aborted, c.sum.Delimiter, c.sum.Columns, c.sum.Sheet = res.aborted, res.delim, res.columns, res.sheet
	c.sum.HiddenRows = res.hidden
	c.sum.HeaderLine, c.sum.Info = res.headerLine, c.cfg.info()
	if len(res.titles) > 0 && !res.aborted {
		c.sum.Warnings = append(c.sum.Warnings, titleWarning(res.titleSheet(), res.titles, res.headerLine))
	}
	if err != nil {
		return nil, fmt.Errorf("payfile: %s: %w", c.name, err)
	}
	return hashes, nil
}

// addTotal adds a valid row's amount to total unless that takes it over
// the ceiling: then it reports the row (KindTotal, which refuses the file)
// and leaves total as it was.
func (c *checker) addTotal(total *money.Amount, rec *record, a money.Amount, emit func(Error)) bool {
	t, err := total.AddChecked(a, c.cfg.ceiling)
	if err != nil {
		emit(rec.at(Error{Line: rec.Line, Column: ColAmount, Kind: KindTotal,
			Message: fmt.Sprintf("%q takes the file's total from %s over %s, the largest sum counted exactly with %d decimals: split the file", rec.Amount, total.StringFixed(c.cfg.scale), c.cfg.ceiling.StringFixed(c.cfg.scale), c.cfg.scale)}))
		return false
	}
	*total = t
	return true
}

// collisions returns the hashes that occur more than once (nil: none).
func collisions(hashes []uint64) map[uint64]struct{} {
	slices.Sort(hashes)
	var collided map[uint64]struct{}
	for i := 1; i < len(hashes); i++ {
		if hashes[i] == hashes[i-1] {
			if collided == nil {
				collided = make(map[uint64]struct{})
			}
			collided[hashes[i]] = struct{}{}
		}
	}
	return collided
}

func (c *checker) collides(collided map[uint64]struct{}, key string) bool {
	_, ok := collided[c.hash(key)]
	return ok
}

// findDuplicates is pass 2, over the file read again: for the rows whose
// hash collided, compare the externalIds themselves, by their key (extid:
// NFC and case folded). Validity and the total are recomputed.
func (c *checker) findDuplicates(ctx context.Context, collided map[uint64]struct{}) error {
	type first struct {
		line int
		id   string
	}
	firstOf := make(map[string]first)
	var dupLines []int
	rows, valid, total := 0, 0, money.Zero
	discard := func(Error) {}
	res, err := scan(ctx, c.r, c.cfg, discard, func(rec *record) error {
		rows++
		row, ok, idOK := c.cfg.validate(rec, discard)
		key := ""
		if idOK {
			key = extid.Key(row.ExternalID)
		}
		if idOK && c.collides(collided, key) {
			if f, seen := firstOf[key]; seen {
				msg := fmt.Sprintf("%q already appears on %s %d", row.ExternalID, lineWord(rec), f.line)
				if f.id != row.ExternalID {
					msg = fmt.Sprintf("%q is the same id as %q on %s %d (ids are compared ignoring case and Unicode normalization)", row.ExternalID, f.id, lineWord(rec), f.line)
				}
				c.emit(rec.at(Error{Line: rec.Line, Column: ColExternalID, Kind: KindDuplicate, Message: msg}))
				dupLines = append(dupLines, rec.Line)
				ok = false
			} else {
				firstOf[key] = first{rec.Line, row.ExternalID}
			}
		}
		if ok && c.addTotal(&total, rec, row.Amount, discard) {
			valid++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("payfile: %s: %w", c.name, err)
	}
	if res.aborted || rows != c.sum.Rows {
		return fmt.Errorf("%w: %s", ErrFileChanged, c.name)
	}
	c.sum.ValidRows, c.sum.Total = valid, total
	c.sum.BadLines = mergeLines(c.sum.BadLines, dupLines)
	return nil
}

// mergeLines merges two ascending line lists without repeats.
func mergeLines(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	out := make([]int, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var v int
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			v, i = a[i], i+1
		case i == len(a) || b[j] < a[i]:
			v, j = b[j], j+1
		default:
			v, i, j = a[i], i+1, j+1
		}
		out = append(out, v)
	}
	return out
}

// config is Options with defaults applied and column names resolved.
type config struct {
	scale    int
	amounts  money.Format
	max      money.Amount
	ceiling  money.Amount // the file's total may not pass it
	maxID    int
	maxLine  int
	workbook bool   // read as an XLSX workbook
	sheet    string // its sheet, "" for the first
	// includeHidden: Options.IncludeHiddenRows
	includeHidden bool
	telecom       *Dictionary
	banks         *Dictionary
	props         []string // canonical names of the configured extra properties (sent to the PSP)
	extras        []string // once the header is read: props, then the file's informational columns
	cardPref      CardPrefixes
	allowed       []string          // every allowed column, canonical names, in display order
	byCanon       map[string]string // folded name -> canonical name
	payDate       string            // Options.PayDateColumn folded, or ""
	payDateName   string            // Options.PayDateColumn as given, for errors
}

// configFor is config for the file name: a workbook if it ends .xlsx.
func (o Options) configFor(name string) (*config, error) {
	c, err := o.config()
	if err != nil {
		return nil, err
	}
	c.workbook, c.sheet, c.includeHidden = IsWorkbook(name), o.Sheet, o.IncludeHiddenRows
	return c, nil
}

// lineWord is how a position in the file is called: a line, or a
// workbook's row.
func lineWord(rec *record) string {
	if rec.sheet != "" {
		return "row"
	}
	return "line"
}

// columns sets the columns c accepts: the four of the PSP, then extras
// (information columns), each known by its folded name.
func (c *config) columns(extras []string) error {
	c.allowed = []string{ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator}
	c.byCanon = make(map[string]string, len(c.allowed)+len(extras))
	for _, n := range c.allowed {
		c.byCanon[fold(n)] = n
	}
	for _, n := range extras {
		f := fold(n)
		if f == "" || strings.HasPrefix(n, "_") {
			return fmt.Errorf("%w: extra column name %q", ErrBadOptions, n)
		}
		if prev, dup := c.byCanon[f]; dup {
			return fmt.Errorf("%w: extra column %q is the same as %q", ErrBadOptions, n, prev)
		}
		c.byCanon[f] = n
		c.props = append(c.props, n)
		c.allowed = append(c.allowed, n)
	}
	return nil
}

func (o Options) config() (*config, error) {
	c := &config{scale: o.Scale, max: o.MaxAmount,
		maxID: o.MaxExternalIDLen, maxLine: o.MaxLineBytes, amounts: o.AmountFormat,
		telecom: o.TelecomOperators, banks: o.BankNames, cardPref: o.CardPrefixes, payDate: fold(o.PayDateColumn),
		payDateName: strings.TrimSpace(o.PayDateColumn)}
	if o.CardPrefixes != CardPrefixesIIN && o.CardPrefixes != CardPrefixesAny {
		return nil, fmt.Errorf("%w: card prefixes %d", ErrBadOptions, o.CardPrefixes)
	}
	if o.AmountFormat.Example() == "" {
		return nil, fmt.Errorf("%w: amount format %v", ErrBadOptions, o.AmountFormat)
	}
	switch {
	case c.scale == 0:
		c.scale = money.DefaultScale
	case c.scale < 0:
		c.scale = 0
	}
	c.ceiling = money.Ceiling(c.scale)
	switch {
	case c.max.IsZero():
		c.max = money.DefaultMax(c.scale)
	case c.max.Cmp(c.ceiling) > 0:
		return nil, fmt.Errorf("%w: maximum amount %s is above %s, the largest amount counted exactly with %d decimals", ErrBadOptions, c.max, c.ceiling.StringFixed(c.scale), c.scale)
	}
	if c.maxID <= 0 {
		c.maxID = DefaultMaxExternalIDLen
	}
	if c.maxLine <= 0 {
		c.maxLine = DefaultMaxLineBytes
	}
	if c.maxLine < 256 {
		return nil, fmt.Errorf("%w: MaxLineBytes %d is below 256", ErrBadOptions, c.maxLine)
	}
	extras := o.ExtraColumns
	if extras == nil {
		extras = DefaultExtraColumns
	}
	if c.banks != nil && !slices.ContainsFunc(extras, func(n string) bool { return fold(n) == fold(ColBankName) }) {
		extras = append(slices.Clip(extras), ColBankName)
	}
	if err := c.columns(extras); err != nil {
		return nil, err
	}
	if _, taken := c.byCanon[fold(ColReason)]; !taken {
		c.byCanon[fold(ColReason)] = ColReason
	}
	c.extras = c.props
	return c, nil
}

// info returns the names of the informational columns of the file whose
// header was read last (nil: none).
func (c *config) info() []string {
	if len(c.extras) == len(c.props) {
		return nil
	}
	return slices.Clone(c.extras[len(c.props):])
}

// lineList writes ascending lines for a message: "line 1", "lines 1-2",
// "lines 1, 3".
func lineList(lines []int) string {
	if len(lines) == 1 {
		return fmt.Sprintf("line %d", lines[0])
	}
	consecutive := lines[len(lines)-1]-lines[0] == len(lines)-1
	if consecutive {
		return fmt.Sprintf("lines %d-%d", lines[0], lines[len(lines)-1])
	}
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = strconv.Itoa(l)
	}
	return "lines " + strings.Join(parts, ", ")
}
