package payfile

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gocarina/gocsv"
)

// How the reading is split between encoding/csv and gocsv:
//
// encoding/csv parses the text: it alone knows the physical line of each
// record (Reader.FieldPos), even when a quoted field spans lines, and it
// reads through lineReader, which bounds lines and records and checks the
// encoding. Its records go through decoder, which checks the structure
// (field count, quotes, repeated header, blank rows) and rewrites each
// record for gocsv under canonical column names, with the line number and
// any structural problem as extra columns.
//
// gocsv maps those records by column name onto the record struct, through
// UnmarshalDecoderToChan. Not used from gocsv, and why:
//   - SetHeaderNormalizer, FailIfDoubleHeaderNames and the other switches
//     are process-wide globals; the header is canonicalised and checked
//     here instead, so gocsv only ever sees canonical names.
//   - UnmarshalDecoderToCallback cannot stop early; the channel form lets
//     Each stop when its callback fails.
//   - gocsv's own line numbers count records, not physical lines, and its
//     goroutine reads ahead of the consumer: the line therefore travels
//     inside the record (column _line), never in shared state.

// record is one data record as gocsv maps it. Only the decoder's synthetic
// columns start with '_'; the others are the canonical column names.
type record struct {
	LineText   string `csv:"_line"`    // the line number, given to gocsv as text
	Line       int    `csv:"-"`        // LineText parsed, set by scan
	Problem    string `csv:"_problem"` // structural problem; the fields are then empty
	Extra      string `csv:"_extra"`   // values of the configured extra columns, NUL-separated
	ExternalID string `csv:"externalId"`
	Amount     string `csv:"amount"`
	CardNumber string `csv:"cardNumber"`
	Telecom    string `csv:"telecomOperator"`

	// Set for the records of a workbook only (gocsv skips unexported
	// fields).
	sheet       string            // sheetRef of the sheet
	letters     map[string]string // canonical column name -> column letter
	cellErrs    []Error           // cells that could not be taken as text; their fields are empty
	amountPlain bool              // Amount came from a number cell: plain form
}

// at completes an error of this record with its sheet and cell, for a
// workbook.
func (rec *record) at(e Error) Error {
	if rec.sheet != "" {
		e.Sheet = rec.sheet
		if l, ok := rec.letters[e.Column]; ok {
			e.Cell = l + strconv.Itoa(e.Line)
		}
	}
	return e
}

// cellBad reports whether the record's cell of column col was refused.
func (rec *record) cellBad(col string) bool {
	for _, e := range rec.cellErrs {
		if e.Column == col {
			return true
		}
	}
	return false
}

const (
	colLine    = "_line"
	colProblem = "_problem"
	colExtra   = "_extra"
	extraSep   = "\x00" // lineReader refuses NUL bytes, so no value holds one
)

var errStopped = errors.New("payfile: stopped")

type scanResult struct {
	aborted bool
	delim   rune
	columns []string
	sheet   string // a workbook's sheet
	hidden  int    // a workbook's data rows not shown
	// headerLine is the line of the header row; titles the lines above it
	// skipped as a title.
	headerLine int
	titles     []int
}

// blankFields reports whether every field is empty once trimmed of spaces.
func blankFields(fields []string) bool {
	for _, f := range fields {
		if strings.Trim(f, " ") != "" {
			return false
		}
	}
	return true
}

// scan reads the header (reporting its problems to emit) and then hands
// every data record to fn in file order. A problem that stops the reading
// is reported to emit and sets aborted; the error return is for I/O, ctx
// and fn's own errors.
func scan(ctx context.Context, r io.Reader, cfg *config, emit func(Error), fn func(*record) error) (scanResult, error) {
	var res scanResult
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if cfg.workbook {
		return scanWorkbook(ctx, r, cfg, emit, fn)
	}
	lr := newLineReader(r, cfg.maxLine)
	res.delim = lr.detectDelimiter()
	cr := csv.NewReader(lr)
	cr.Comma = res.delim
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true

	h, titleLines, err := readHeader(cfg, lr, cr, emit)
	if err != nil {
		return res, err
	}
	if h == nil {
		res.aborted = true
		return res, nil
	}
	res.columns, res.headerLine, res.titles = h.names, h.line, titleLines

	rows, aborted, err := readRecords(ctx, lr, cr, h, len(cfg.extras), emit, fn)
	if err != nil || aborted {
		res.aborted = aborted
		return res, err
	}
	if rows == 0 {
		emit(Error{Line: h.line, Column: ColumnFile, Kind: KindEmpty, Message: "the file has a header but no data rows"})
		res.aborted = true
	}
	return res, nil
}

// readHeader reads the rows up to the header, the first row that is not
// blank or a title, and returns it with the lines taken as a title. A
// problem that makes the file unusable is reported to emit and returns no
// header and no error; the error return is for I/O.
func readHeader(cfg *config, lr *lineReader, cr *csv.Reader, emit func(Error)) (*header, []int, error) {
	tt := titles{cfg: cfg}
	for {
		lr.startRecord()
		fields, err := cr.Read()
		if err != nil {
			return nil, nil, reportNoHeader(err, &tt, lr, emit)
		}
		line, _ := cr.FieldPos(0)
		if blankFields(fields) || tt.skip(fields, line) {
			continue
		}
		h, problems := cfg.parseHeader(fields, line)
		if problems != nil {
			for _, e := range problems {
				emit(tt.explain(e))
			}
			return nil, nil, nil
		}
		return h, tt.lines, nil
	}
}

// reportNoHeader reports to emit why the file ended or failed, with err,
// before its header: it has only titles, it is empty, or it cannot be
// read. The error return is err when it is not the file's problem (I/O).
func reportNoHeader(err error, tt *titles, lr *lineReader, emit func(Error)) error {
	if e, ok := tt.noHeader(); ok && err == io.EOF {
		emit(e)
		return nil
	}
	var fe *fatalError
	var pe *csv.ParseError
	switch {
	case err == io.EOF:
		emit(Error{Line: 1, Column: ColumnFile, Kind: KindEmpty, Message: "the file is empty"})
	case errors.As(err, &fe):
		emit(fe.e)
	case errors.As(err, &pe):
		emit(Error{Line: pe.StartLine, Column: ColumnHeader, Kind: KindStructure, Message: quoteMessage(pe, lr)})
	default:
		return err
	}
	return nil
}

// readRecords maps the data records after the header h through gocsv and
// hands each to fn in file order, and returns how many. A problem of the
// file that stops the reading is reported to emit and sets aborted; the
// error return is for I/O, ctx and fn's own errors.
func readRecords(ctx context.Context, lr *lineReader, cr *csv.Reader, h *header, nExtras int, emit func(Error), fn func(*record) error) (rows int, aborted bool, err error) {
	d := newDecoder(ctx, lr, cr, h, nExtras)
	ch := make(chan record, 64)
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				errc <- fmt.Errorf("payfile: csv mapping failed: %v", p)
			}
		}()
		errc <- gocsv.UnmarshalDecoderToChan(d, ch)
	}()
	var fnErr error
	var cur record // one variable for all records: fn gets a pointer to it
	for rec := range ch {
		if fnErr != nil {
			continue // drain: the decoder stops at its next record
		}
		rows++
		cur = rec
		cur.Line, _ = strconv.Atoi(rec.LineText) // written by the decoder: always a number
		if err := fn(&cur); err != nil {
			fnErr = err
			d.stop.Store(true)
		}
	}
	err = <-errc
	if fnErr != nil {
		return rows, false, fnErr
	}
	var fe *fatalError
	switch {
	case err == nil:
		return rows, false, nil
	case errors.As(err, &fe):
		emit(fe.e)
		return rows, true, nil
	}
	return rows, false, err
}

// decoder is the gocsv.SimpleDecoder between encoding/csv and gocsv. It runs
// on gocsv's goroutine.
type decoder struct {
	ctx  context.Context
	stop atomic.Bool
	lr   *lineReader
	cr   *csv.Reader
	h    *header

	header     []string // the header given to gocsv
	out        []string // the record given to gocsv, reused: gocsv is done with it before asking for the next
	sentHeader bool
	nExtras    int
	iLine      int // index of _line in out
	iProblem   int
	iExtra     int
	extraVals  []string
}

func newDecoder(ctx context.Context, lr *lineReader, cr *csv.Reader, h *header, nExtras int) *decoder {
	d := &decoder{ctx: ctx, lr: lr, cr: cr, h: h, nExtras: nExtras, extraVals: make([]string, nExtras)}
	// The file's fixed columns under their canonical names, its other
	// columns (extra properties and informational ones, carried in _extra)
	// under names no struct tag and no column can have, then the fixed
	// columns the file lacks (always empty), then the synthetic columns.
	// Every struct tag is present, whatever gocsv's global switches say.
	for i, n := range h.names {
		switch n {
		case ColExternalID, ColAmount, ColCardNumber, ColTelecomOperator:
		default:
			n = "\x01" + strconv.Itoa(i)
		}
		d.header = append(d.header, n)
	}
	d.header = append(d.header, h.missing...)
	d.iLine, d.iProblem, d.iExtra = len(d.header), len(d.header)+1, len(d.header)+2
	d.header = append(d.header, colLine, colProblem, colExtra)
	d.out = make([]string, len(d.header))
	return d
}

// GetCSVRows is not used by gocsv's streaming functions.
func (d *decoder) GetCSVRows() ([][]string, error) {
	return nil, errors.New("payfile: GetCSVRows is not supported")
}

// GetCSVRow returns the header first, then one mapped record per call.
func (d *decoder) GetCSVRow() ([]string, error) {
	if !d.sentHeader {
		d.sentHeader = true
		return d.header, nil
	}
	for {
		if d.stop.Load() {
			return nil, errStopped
		}
		if err := d.ctx.Err(); err != nil {
			return nil, err
		}
		d.lr.startRecord()
		fields, err := d.cr.Read()
		if err != nil {
			var fe *fatalError
			var pe *csv.ParseError
			switch {
			case err == io.EOF, errors.As(err, &fe):
				return nil, err
			case errors.As(err, &pe) && (errors.Is(pe.Err, csv.ErrQuote) || errors.Is(pe.Err, csv.ErrBareQuote)):
				return d.problem(pe.StartLine, quoteMessage(pe, d.lr)), nil
			}
			return nil, err
		}
		line, _ := d.cr.FieldPos(0)
		blank := true
		for i, f := range fields {
			fields[i] = strings.Trim(f, " ")
			blank = blank && fields[i] == ""
		}
		switch end := d.lr.line; {
		case end > line:
			return d.problem(line, fmt.Sprintf("the record spans lines %d-%d: a quoted field holds line breaks (is a quote left open?)", line, end)), nil
		case blank:
			continue // an empty row, as spreadsheets write them (";;;")
		case len(fields) != len(d.h.names):
			return d.problem(line, fmt.Sprintf("has %s, the header has %d", plural(len(fields), "field"), len(d.h.names))), nil
		case d.h.repeats(fields):
			return d.problem(line, "repeats the header row (were two files joined?)"), nil
		}
		out := d.out
		clear(out)
		copy(out, fields)
		out[d.iLine] = strconv.Itoa(line)
		if d.nExtras > 0 {
			for k, i := range d.h.extras {
				d.extraVals[k] = ""
				if i >= 0 {
					d.extraVals[k] = fields[i]
				}
			}
			out[d.iExtra] = strings.Join(d.extraVals, extraSep)
		}
		return out, nil
	}
}

// problem is a record that carries only a structural problem.
func (d *decoder) problem(line int, msg string) []string {
	out := d.out
	clear(out)
	out[d.iLine] = strconv.Itoa(line)
	out[d.iProblem] = msg
	return out
}

// quoteMessage explains a quote error of encoding/csv, given the line
// reader at the point of the error.
func quoteMessage(pe *csv.ParseError, lr *lineReader) string {
	switch {
	case errors.Is(pe.Err, csv.ErrBareQuote):
		return fmt.Sprintf(`quote (") inside an unquoted field at column %d: quote the whole field and double the quotes inside it`, pe.Column)
	case lr.eof && pe.Line >= lr.line && pe.Column > lr.lastLen:
		// csv reached the end of the input inside the quoted field.
		return fmt.Sprintf("the quote opened on this line is never closed (the field runs to the end of the file, line %d)", lr.line)
	case pe.Line > pe.StartLine:
		return fmt.Sprintf("the quoted field opened on this line runs on to line %d, where its closing quote is followed by other text (is a quote left open?)", pe.Line)
	default:
		return fmt.Sprintf(`text after a closing quote at column %d: quote the whole field and double the quotes inside it`, pe.Column)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// titleSheet is the sheet as errors name it, "" for a CSV file.
func (res *scanResult) titleSheet() string {
	if res.sheet == "" {
		return ""
	}
	return sheetRef(res.sheet)
}
