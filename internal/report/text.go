package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WriteSummaryText writes s as a table for a terminal: one line per state
// with its rows and amount right-aligned, a total line, the created rows
// awaiting their outcome, then one line per outcome group and their total,
// whether the batch is final, and the reconciliation line, either
//
//	reconciled: 1234.56 = 1234.56 (12 rows)
//
// or a line starting with "*** MISMATCH ***" that gives the totals, their
// difference and both row counts.
func WriteSummaryText(w io.Writer, s Summary) error {
	type line struct{ name, rows, amount string }
	lines := []line{{"state", "rows", "amount"}}
	pending := 0
	for _, st := range s.ByState {
		lines = append(lines, line{printable(st.State), strconv.Itoa(st.Rows), formatAmount(st.Amount, s.Scale)})
		if !isFinal(st.State) {
			pending += st.Rows
		}
	}
	pending += s.Awaiting.Rows
	lines = append(lines,
		line{"total", strconv.Itoa(s.Rows), formatAmount(s.Total, s.Scale)},
		line{"created awaiting outcome", strconv.Itoa(s.Awaiting.Rows), formatAmount(s.Awaiting.Amount, s.Scale)},
		line{},
		line{"outcome", "rows", "amount"},
	)
	for _, g := range s.ByGroup {
		lines = append(lines, line{g.Group, strconv.Itoa(g.Rows), formatAmount(g.Amount, s.Scale)})
	}
	lines = append(lines, line{"total", strconv.Itoa(s.Rows), formatAmount(s.GroupsTotal, s.Scale)})
	var ws, wr, wa int
	for _, l := range lines {
		ws = max(ws, utf8.RuneCountInString(l.name))
		wr = max(wr, len(l.rows))
		wa = max(wa, len(l.amount))
	}

	bw := bufio.NewWriter(w)
	for _, l := range lines {
		if l == (line{}) {
			fmt.Fprintln(bw)
			continue
		}
		fmt.Fprintf(bw, "%s%s  %*s  %*s\n", l.name, strings.Repeat(" ", ws-utf8.RuneCountInString(l.name)), wr, l.rows, wa, l.amount)
	}
	if s.Final {
		fmt.Fprintln(bw, "final: yes, no row is in progress or awaiting its outcome")
	} else {
		fmt.Fprintf(bw, "final: no, %d %s still in progress or awaiting the outcome\n", pending, plural(pending, "row", "rows"))
	}
	if l, ok := s.LeftForGood(); ok {
		fmt.Fprintf(bw, "left for good: %s paid (sent %s, of which %s came back: returned)\n",
			formatAmount(l.Paid, s.Scale), formatAmount(l.Sent, s.Scale), formatAmount(l.Returned, s.Scale))
	}
	total, fileTotal := formatAmount(s.Total, s.Scale), formatAmount(s.FileTotal, s.Scale)
	if s.Reconciled {
		fmt.Fprintf(bw, "reconciled: %s = %s (%d %s); %s = %s\n",
			total, fileTotal, s.Rows, plural(s.Rows, "row", "rows"), strings.Join(Groups, " + "), formatAmount(s.GroupsTotal, s.Scale))
	} else {
		diff := s.Total.Decimal().Sub(s.FileTotal.Decimal())
		fmt.Fprintf(bw, "*** MISMATCH *** total of states %s %s file total %s (difference %s), outcomes %s, rows %d %s file rows %d\n",
			total, relation(s.Total.Cmp(s.FileTotal) == 0), fileTotal, formatDecimal(diff, s.Scale),
			formatAmount(s.GroupsTotal, s.Scale), s.Rows, relation(s.Rows == s.FileRows), s.FileRows)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: writing summary: %w", err)
	}
	return nil
}

func relation(equal bool) string {
	if equal {
		return "="
	}
	return "!="
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printable keeps a state name from sending control sequences to a
// terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}

// SummaryExt ends the name of the summary file written beside a result
// file (SummaryPath).
const SummaryExt = ".summary.txt"

// SummaryPath is the summary file of a result file: its name with the
// ending ".result.csv" (or, failing that, its extension) replaced by
// ".summary.txt": outbox/payouts.csv.result.csv gives
// outbox/payouts.csv.summary.txt, out/june.csv gives out/june.summary.txt.
func SummaryPath(result string) string {
	if base, ok := strings.CutSuffix(result, ".result.csv"); ok {
		return base + SummaryExt
	}
	dir, name := splitDir(result)
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	return dir + name + SummaryExt
}

func splitDir(path string) (dir, name string) {
	i := strings.LastIndexAny(path, `/\`)
	return path[:i+1], path[i+1:]
}

// WriteSummary writes the summary file of a result file (SummaryPath): the
// batch (id, file, when it was loaded, its rows and total as loaded), then
// the table of WriteSummaryText: totals by state and by outcome group,
// whether the batch is final, and the reconciliation line. It is text for
// a person; programs read the JSON result or the XLSX Summary sheet.
func WriteSummary(w io.Writer, b Batch, s Summary) error {
	bw := bufio.NewWriter(w)
	loaded := formatTime(b.LoadedAt)
	if loaded == "" {
		loaded = "-"
	}
	fmt.Fprintf(bw, "batch   %s\nfile    %s\nloaded  %s\nrows    %d\ntotal   %s\n\n",
		printable(b.ID), printable(scrub(b.File)), loaded, b.Rows, formatAmount(b.Total, b.Scale))
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: writing summary: %w", err)
	}
	return WriteSummaryText(w, s)
}
