package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/acme/payout/internal/payfile"
	"github.com/acme/payout/internal/queue"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// embeddedGCPercent is the garbage collector's target of `payout run` on
// its embedded Redis, unless GOGC or GOMEMLIMIT is set. miniredis builds a
// whole Lua interpreter for every script call, so nearly all the process
// allocates is short-lived garbage, and the default of 100 lets the heap
// grow to twice the live state before collecting it.
const embeddedGCPercent = 50

// tuneEmbeddedGC sets embeddedGCPercent unless the environment sets the
// collector; the returned func restores the previous setting.
func tuneEmbeddedGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" || getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(embeddedGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// dropCompletedEvery is how often `payout run` on its embedded Redis
// deletes the completed tasks of the payout queue.
const dropCompletedEvery = 2 * time.Second

// dropCompleted deletes the payout queue's completed tasks every interval
// until ctx ends: on the embedded Redis, which ends with the command, the
// retention of completed tasks (jobs.Retention, for the web UI) is memory
// kept for nobody. It keeps no safety: the ledger decides what a task does
// and the queue replaces a completed task anyway (queue.Remind); Asynq's janitor does
// the same once the retention is over. Notification deliveries, whose
// retention refuses a second emit, are on their own queue and stay.
func dropCompleted(ctx context.Context, rdb redis.UniversalClient, every time.Duration, log zerolog.Logger) {
	q := queue.New(rdb)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := q.DropCompleted(ctx); err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("embedded redis: delete completed tasks")
		}
	}
}

// DefaultEmbeddedMaxRows is the largest file `payout run` loads into its
// embedded Redis without a warning: the embedded Redis (miniredis) keeps
// every payout in the process as Go maps and strings: about 9 KB of peak
// RSS a row (bench/README.md).
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
		"  (umask 077; payout keygen > data.key)\n"+
		"  payout run --redis redis://127.0.0.1:6379/0 --data-key-file data.key %s\n", path, maxRows, shellQuote(path))
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and ./_-:@%+= (a path with a space or a quote is pasted
// as one word), and makes a path starting with - relative (not a flag).
func shellQuote(s string) string {
	if strings.HasPrefix(s, "-") {
		s = "./" + s // a relative path, not a flag
	}
	return shellWord(s)
}

// shellWord quotes s for a POSIX shell when it holds anything but
// letters, digits and ./_-:@%+=; s is any argument, a flag included.
func shellWord(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("./_-:@%+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// userinfo matches the user:password@ of a URL.
var userinfo = regexp.MustCompile(`(://)[^/@\s]*@`)

// redactUserinfo replaces the userinfo of every URL in s by "USER:PASSWORD@": a
// command line shown back may carry a password in a URL.
func redactUserinfo(s string) string {
	return userinfo.ReplaceAllString(s, "${1}USER:PASSWORD@")
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
