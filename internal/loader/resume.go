package loader

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acme/payout/internal/approval"
	"github.com/acme/payout/internal/money"
)

// ErrOtherOptions is matched by the error of a load that would resume an
// interrupted load of the same content under other options than the first
// run's: refused before anything is claimed (see OptionsError).
var ErrOtherOptions = errors.New("resume with the same options as the first run")

// OptionsError names the options a rerun gives otherwise than the run
// that began the batch.
type OptionsError struct {
	Batch string
	Diffs []string // "amount format comma-dot (this run: plain)"
}

func (e *OptionsError) Error() string {
	return fmt.Sprintf("batch %s is an interrupted load begun with other options; nothing done: %v: %s",
		e.Batch, ErrOtherOptions, strings.Join(e.Diffs, ", "))
}

func (e *OptionsError) Is(target error) bool { return target == ErrOtherOptions }

// readingOption is one option that decides what a row of a file means or
// whether it is loaded.
type readingOption struct{ name, value string }

// readingOptions are, in a fixed order, the options under which the rows
// of a file are read: a resumed load must read them as the run that began
// the batch did, or one batch would hold two readings of one file (1.500
// read as 1500 and as 1.5). Values are canonical: a default is written as
// what it means.
func readingOptions(o Options) []readingOption {
	maxAmount := "none"
	if !o.File.MaxAmount.IsZero() {
		maxAmount = o.File.MaxAmount.String()
	}
	sheet := o.File.Sheet
	if sheet == "" {
		sheet = "(the first shown)"
	}
	extra := "(default)"
	if o.File.ExtraColumns != nil {
		extra = "[" + strings.Join(o.File.ExtraColumns, " ") + "]"
	}
	return append([]readingOption{
		{"amount format", o.File.AmountFormat.String()},
		{"decimals", strconv.Itoa(o.File.Decimals())},
		{"max amount", maxAmount},
		{"card prefixes", o.File.CardPrefixes.String()},
		{"sheet", sheet},
		{"include hidden rows", strconv.FormatBool(o.File.IncludeHiddenRows)},
		{"partial", strconv.FormatBool(o.Partial)},
		{"extra columns", extra},
	}, releaseReading(o)...)
}

// encodeReading is the canonical encoding of the reading options, one
// "name=value" a line (values never hold a newline: sheet names cannot).
func encodeReading(o Options) string {
	var b strings.Builder
	for _, r := range readingOptions(o) {
		b.WriteString(r.name)
		b.WriteByte('=')
		b.WriteString(strings.ReplaceAll(r.value, "\n", " "))
		b.WriteByte('\n')
	}
	return b.String()
}

// readingDiffs names the options of encoding (a batch's) that o gives
// otherwise, in the order of readingOptions; an option the batch does not
// record is named as unknown.
func readingDiffs(stored string, o Options) []string {
	first := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(stored, "\n"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			first[k] = v
		}
	}
	var diffs []string
	for _, r := range readingOptions(o) {
		v, ok := first[r.name]
		if !ok {
			v = "(not recorded)"
		}
		if v != r.value {
			diffs = append(diffs, fmt.Sprintf("%s %s (this run: %s)", r.name, v, r.value))
		}
	}
	if len(diffs) == 0 {
		diffs = append(diffs, "(options of another version of payout)")
	}
	return diffs
}

// encodePolicy is the approval policy recorded on a batch when it is
// begun (ledger.Batch.Policy): a load that resumes it decides with it.
func encodePolicy(a Approval) string {
	return strings.Join([]string{
		"required=" + strconv.FormatBool(a.Required),
		"foureyes=" + strconv.FormatBool(a.FourEyes),
		"autobelow=" + a.AutoBelow.String(),
		"maxbatch=" + a.MaxBatchTotal.String(),
		"daily=" + a.DailyLimit.String(),
		"expiry=" + a.Expiry.String(),
		"rules=" + a.Rules.Encode(),
	}, ";")
}

// decodePolicy reads encodePolicy's encoding; by is who loads now.
func decodePolicy(s, by string) (Approval, error) {
	a := Approval{By: by}
	for _, f := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "required":
			a.Required, err = strconv.ParseBool(v)
		case "foureyes":
			a.FourEyes, err = strconv.ParseBool(v)
		case "autobelow":
			a.AutoBelow, err = limitAmount(v)
		case "maxbatch":
			a.MaxBatchTotal, err = limitAmount(v)
		case "daily":
			a.DailyLimit, err = limitAmount(v)
		case "expiry":
			a.Expiry, err = time.ParseDuration(v)
		case "rules":
			a.Rules, err = approval.Decode(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return a, fmt.Errorf("the approval policy recorded on the batch (%q): %w", s, err)
		}
	}
	return a, nil
}

// limitAmount reads a recorded limit: "0" is none (money.Parse takes
// only amounts above zero).
func limitAmount(v string) (money.Amount, error) {
	if v == "0" {
		return money.Zero, nil
	}
	return money.Parse(v, 18)
}
