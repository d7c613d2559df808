package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strings"
)

// Formats of a result file (Write).
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

// Write writes the result file of batch b in format (csv, the default
// for "", json or xlsx); o applies to a CSV only. It returns the summary
// of the rows it wrote.
func Write(w io.Writer, format string, b Batch, rows iter.Seq2[Row, error], o CSVOptions) (Summary, error) {
	switch format {
	case CSV, "":
		return WriteCSVWith(w, b, rows, o)
	case JSON:
		return WriteJSON(w, b, rows)
	case XLSX:
		return WriteXLSX(w, b, rows)
	}
	return Summary{}, fmt.Errorf("%q: %w", format, ErrFormat)
}

// File is one file WriteFiles wrote.
type File struct {
	Path string
	Kind string // "result" or "summary"
}

// WriteFiles writes the result file of batch b to path in format (""
// for the format its name asks for: FormatOf) and, for a CSV without the
// summary trailer, the summary file beside it (SummaryPath): a JSON result
// holds its summary, an XLSX its Summary sheet. Each file is written to a
// temporary file in the same folder, fsynced and renamed into place when
// complete (mode 0640), so that a reader never sees half a file. It
// returns the summary and the files written.
func WriteFiles(path, format string, b Batch, rows iter.Seq2[Row, error], o CSVOptions) (Summary, []File, error) {
	if format == "" {
		format = FormatOf(path)
	}
	var sum Summary
	err := writeAtomic(path, func(w io.Writer) (err error) {
		sum, err = Write(w, format, b, rows, o)
		return err
	})
	if err != nil {
		return sum, nil, err
	}
	files := []File{{Path: path, Kind: "result"}}
	if format != CSV || o.SummaryInCSV {
		return sum, files, nil
	}
	sp := SummaryPath(path)
	if err := writeAtomic(sp, func(w io.Writer) error { return WriteSummary(w, b, sum) }); err != nil {
		return sum, files, err
	}
	return sum, append(files, File{Path: sp, Kind: "summary"}), nil
}

// writeAtomic writes path through a temporary file in its folder, fsynced
// and renamed into place once write returned nil; on error nothing is
// left behind.
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
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
