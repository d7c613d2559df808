package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/metrics"
)

// loadTally counts what one payout load run did, for --metrics-textfile.
type loadTally struct {
	start                time.Time
	files, refused, rows int
	skip                 bool
}

// skipped: another loader holds the spool; this run did nothing and
// records nothing (a hung loader holding the lock must not look like
// runs that succeed).
func (t *loadTally) skipped() {
	if t != nil {
		t.skip = true
	}
}

func (t *loadTally) add(r loader.Result) {
	if t == nil {
		return
	}
	t.files++
	if !r.Loaded || len(r.Errors) > 0 {
		t.refused++
	}
	t.rows += r.Registered
}

// record writes the run to the textfile at path: a success unless the run
// stopped on a fault of its own (exit 2 or 3); refused files are the
// files' fault (exit 1) and counted as such. A textfile that cannot be
// written is said on stderr and does not change the exit code: the load
// itself is done.
func (t *loadTally) record(e *env, path string, err error) {
	if t.skip {
		return
	}
	run := metrics.LoaderRun{OK: err == nil || errors.Is(err, errRejected), Finished: time.Now(),
		Duration: time.Since(t.start), Files: t.files, Refused: t.refused, Rows: t.rows}
	if werr := metrics.WriteLoaderRun(path, run); werr != nil {
		fmt.Fprintf(e.stderr, "--metrics-textfile: %v\n", werr)
	}
}
