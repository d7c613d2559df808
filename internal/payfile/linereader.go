package payfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// fatalError is a validation problem that stops reading the file. It travels
// as an error through encoding/csv and gocsv and is reported, not returned.
type fatalError struct{ e Error }

func (f *fatalError) Error() string { return f.e.Message }

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// lineReader sits between the file and encoding/csv. It hands out at most
// one physical line per Read, so that csv's own buffer never reads past the
// end of the record it is parsing: the line count and the record size kept
// here are therefore exactly csv's. It refuses, as fatal errors:
//   - a line over max bytes, after reading at most max bytes of it (a 50 MB
//     line costs 64 KiB, not 50 MB);
//   - a record (several lines joined by quotes) over max bytes;
//   - bytes that are not UTF-8 text: invalid UTF-8, NUL and other control
//     bytes (except tab, CR, LF), a UTF-16 byte order mark.
//
// A UTF-8 byte order mark at the start is dropped.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line int    // physical lines fetched so far
	cur  []byte // rest of the line being handed out
	err  error  // sticky error once cur is drained
	eof  bool   // the end of the input was reached
	// lastLen is the length of the last line without its line end.
	lastLen int

	recStart int // first non-blank line of the current record, 0 before it
	recBytes int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, max), max: max}
}

// startRecord tells that csv is about to read a new record.
func (lr *lineReader) startRecord() { lr.recStart, lr.recBytes = 0, 0 }

func (lr *lineReader) Read(p []byte) (int, error) {
	for len(lr.cur) == 0 {
		if lr.err != nil {
			return 0, lr.err
		}
		lr.cur, lr.err = lr.fetch()
	}
	n := copy(p, lr.cur)
	lr.cur = lr.cur[n:]
	return n, nil
}

func (lr *lineReader) fatal(line int, kind Kind, format string, args ...any) error {
	return &fatalError{Error{Line: line, Column: ColumnFile, Kind: kind, Message: fmt.Sprintf(format, args...)}}
}

// fetch reads, checks and accounts the next physical line. The slice is
// valid until the next fetch.
func (lr *lineReader) fetch() ([]byte, error) {
	line, err := lr.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, lr.fatal(lr.line+1, KindStructure, "line is longer than %d bytes", lr.max)
	case err == io.EOF && len(line) == 0:
		lr.eof = true
		return nil, io.EOF
	case err != nil && err != io.EOF:
		return nil, err
	}
	lr.line++
	if lr.line == 1 {
		switch {
		case bytes.HasPrefix(line, utf8BOM):
			line = line[len(utf8BOM):]
		case bytes.HasPrefix(line, []byte{0xFF, 0xFE}) || bytes.HasPrefix(line, []byte{0xFE, 0xFF}):
			return nil, lr.fatal(1, KindEncoding, "the file is UTF-16 text; save it as UTF-8")
		case bytes.HasPrefix(line, []byte("PK\x03\x04")) && bytes.Contains(line[:min(len(line), 128)], []byte("opendocument.spreadsheet")):
			// The first part of an OpenDocument package is its
			// mimetype, stored.
			return nil, lr.fatal(1, KindEncoding, "the file is an OpenDocument spreadsheet (.ods), not CSV text; in LibreOffice Calc use File > Save As and choose Excel 2007-365 (.xlsx), or Text CSV (UTF-8)")
		case bytes.HasPrefix(line, []byte("PK\x03\x04")):
			return nil, lr.fatal(1, KindEncoding, "the file is a ZIP archive (an Excel .xlsx workbook?), not CSV text; save it as CSV UTF-8")
		case bytes.HasPrefix(line, []byte{0xD0, 0xCF, 0x11, 0xE0}):
			return nil, lr.fatal(1, KindEncoding, "the file is an old Excel .xls workbook, not CSV text; save it as CSV UTF-8")
		}
	}
	lr.lastLen = len(bytes.TrimRight(line, "\r\n"))
	if msg := checkText(line); msg != "" {
		return nil, lr.fatal(lr.line, KindEncoding, "%s", msg)
	}
	if lr.recStart == 0 {
		if isBlankLine(line) {
			return line, nil // csv skips blank lines between records
		}
		lr.recStart = lr.line
	}
	lr.recBytes += len(line)
	if lr.recBytes > lr.max {
		return nil, lr.fatal(lr.recStart, KindStructure,
			"the record starting on this line is longer than %d bytes (is a quote left open?)", lr.max)
	}
	return line, nil
}

func isBlankLine(line []byte) bool {
	return len(line) == 0 || (len(line) == 1 && line[0] == '\n') ||
		(len(line) == 2 && line[0] == '\r' && line[1] == '\n')
}

// checkText tells what makes line not UTF-8 text, or "".
func checkText(line []byte) string {
	for i, c := range line {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			if c == 0 {
				return fmt.Sprintf("NUL byte at column %d: binary data or UTF-16 text, not a UTF-8 CSV file", i+1)
			}
			return fmt.Sprintf("control byte 0x%02X at column %d: binary data, not a CSV text file", c, i+1)
		}
	}
	if utf8.Valid(line) {
		return ""
	}
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("invalid UTF-8 byte 0x%02X at column %d: save the file as UTF-8 (Latin-1 or Windows-1252 text?)", line[i], i+1)
		}
		i += size
	}
	return "invalid UTF-8"
}

// detectDelimiter looks at the first non-blank line without consuming it
// and returns ';' when it holds more semicolons than commas outside quotes,
// else ','.
func (lr *lineReader) detectDelimiter() rune {
	size := lr.br.Size()
	for n := 4096; ; n *= 2 {
		if n > size {
			n = size
		}
		buf, err := lr.br.Peek(n)
		complete := err != nil || n == size
		buf = bytes.TrimPrefix(buf, utf8BOM)
		if line, ok := firstContentLine(buf, complete); ok {
			return pickDelimiter(line)
		}
		if complete {
			return ','
		}
	}
}

// firstContentLine finds the first line of buf holding a ',' or ';'. A last line
// without its end counts only when buf is all there is.
func firstContentLine(buf []byte, complete bool) ([]byte, bool) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if !complete {
				return nil, false
			}
			i = len(buf)
		}
		line := bytes.TrimRight(buf[:i], "\r")
		// A line without a delimiter (a title above the header) says
		// nothing of the delimiter.
		if bytes.ContainsAny(line, ",;") {
			return line, true
		}
		if i == len(buf) {
			break
		}
		buf = buf[i+1:]
	}
	return nil, false
}

func pickDelimiter(line []byte) rune {
	commas, semis, quoted := 0, 0, false
	for _, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == ',':
			commas++
		case c == ';':
			semis++
		}
	}
	if semis > commas {
		return ';'
	}
	return ','
}
