package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/acme/payout/internal/payfile"
)

// DefaultEmbeddedMaxRows is the largest file `payout run` loads into its
// embedded Redis without a warning: the embedded Redis (miniredis) keeps
// every payout in the process, about 2 KB of RSS a row.
const DefaultEmbeddedMaxRows = 20_000

// warnEmbeddedSize tells, before loading, that a file is larger than the
// embedded Redis is meant for, and shows the command line for a real one.
// A workbook is not counted (its rows are known only once read).
func warnEmbeddedSize(w io.Writer, path string, maxRows int) {
	if maxRows <= 0 || payfile.IsWorkbook(path) {
		return
	}
	rows, err := countRows(path, maxRows)
	if err != nil || rows <= maxRows {
		return // an unreadable file is reported by the load itself
	}
	fmt.Fprintf(w, "payout run: %s has more than %d rows (--embedded-max-rows): the embedded Redis keeps every payout in this process's memory and loses it at exit; for files this large use a real Redis:\n"+
		"  redis-server --appendonly yes --appendfsync always &\n"+
		"  payout keygen > data.key\n"+
		"  payout run --redis redis://127.0.0.1:6379/0 --data-key-file data.key %s\n", path, maxRows, path)
}

// countRows counts the data lines of a CSV file, stopping past limit.
func countRows(path string, limit int) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	buf := make([]byte, 1<<16)
	lines := 0
	for lines <= limit+1 {
		n, err := r.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	return lines - 1, nil // the header
}
