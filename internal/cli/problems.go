package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acme/payout/internal/worker"
)

// problems collects the usage problems of a command, so that it reports
// them all at once (exit 2) rather than one per attempt.
type problems struct {
	errs  []error
	flags map[string]bool // flags already reported
}

// add records a problem that belongs to no one flag.
func (p *problems) add(format string, a ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, a...))
}

// flag records a problem of the flag name (without dashes).
func (p *problems) flag(name, format string, a ...any) {
	if p.flags == nil {
		p.flags = map[string]bool{}
	}
	p.flags[name] = true
	p.add(format, a...)
}

// has reports whether the flag already has a problem.
func (p *problems) has(name string) bool { return p.flags[name] }

// workerFlagOf names the flag of each worker.Config field the flags set.
var workerFlagOf = map[string]string{
	"Concurrency":          "concurrency",
	"Rate":                 "rate",
	"StatusDelay":          "status-delay",
	"Policy.AbsentChecks":  "absent-checks",
	"Policy.AbsentSpacing": "absent-spacing",
	"Policy.MaxCreates":    "max-creates",
	"Policy.MaxFaults":     "max-status-checks",
	"MaxCreateRetries":     "max-create-retries",
	"Reconcile.Interval":   "reconcile-interval",
	"Reconcile.Grace":      "reconcile-grace",
	"Outcome.Window":       "outcome-window",
	"Outcome.Intervals":    "outcome-intervals",
}

// worker records the problems of worker.Config.Validate (or
// ValidateSettings), each named by its flag unless that flag already has
// one.
func (p *problems) worker(err error) {
	for _, e := range flatten(err) {
		var fe *worker.FieldError
		if !errors.As(e, &fe) {
			p.add("%v", e)
			continue
		}
		field, _, _ := strings.Cut(fe.Field, "[")
		name, ok := workerFlagOf[field]
		switch {
		case !ok:
			p.add("%v", e)
		case !p.has(name):
			p.flag(name, "--%s %v: %s", name, fe.Value, fe.Problem)
		}
	}
}

// workerProblems is the usage error of worker.New's error: each problem
// on its own line, named by its flag where it has one.
func workerProblems(err error) error {
	var p problems
	p.worker(err)
	return p.err()
}

// err is nil without problems, else a usage error (exit 2) listing them.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &exitError{ExitUsage, problemList(p.errs)}
}

// problemList is the error of a command with several usage problems.
type problemList []error

func (l problemList) Error() string   { return errors.Join(l...).Error() }
func (l problemList) Unwrap() []error { return l }

// problemLines returns the problems of err one by one (those of a
// problemList), else err alone.
func problemLines(err error) []error {
	var l problemList
	if errors.As(err, &l) {
		return l
	}
	return []error{err}
}

// flatten returns the errors joined in err (errors.Join), or err alone.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
