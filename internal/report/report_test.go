package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"iter"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
)

func writeCSV(t *testing.T, b Batch, rows []Row) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	s, err := WriteCSV(&buf, b, FromSlice(rows))
	if err != nil {
		t.Fatalf("WriteCSV: %v", err)
	}
	return buf.Bytes(), s
}

func writeJSON(t *testing.T, b Batch, rows []Row) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	s, err := WriteJSON(&buf, b, FromSlice(rows))
	if err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	return buf.Bytes(), s
}

func summaryText(t *testing.T, s Summary) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSummaryText(&buf, s); err != nil {
		t.Fatalf("WriteSummaryText: %v", err)
	}
	return buf.Bytes()
}

func TestGolden(t *testing.T) {
	mismatch, mb := mismatchRows()
	tests := []struct {
		name string
		b    Batch
		rows []Row
	}{
		{"mixed", batchOf("b-7f3a9c", "payouts-2026-01-15.csv", mixedRows()), mixedRows()},
		{"cents", batchOf("b-cents", "cents.csv", centsRows()), centsRows()},
		{"mismatch", mb, mismatch},
		{"outcomes", batchOf("b-outcomes", "payouts-2026-02-01.csv", outcomeRows()), outcomeRows()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cs := writeCSV(t, tt.b, tt.rows)
			golden.Check(t, filepath.Join("testdata", tt.name+".csv"), c)
			var legacy, sum bytes.Buffer
			ls, err := WriteCSVWith(&legacy, tt.b, FromSlice(tt.rows), CSVOptions{SummaryInCSV: true})
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tt.name+".summary-in-csv.csv"), legacy.Bytes())
			assertSameSummary(t, cs, ls)
			if err := WriteSummary(&sum, tt.b, cs); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", tt.name+".summary.txt"), sum.Bytes())
			x, xs := writeXLSX(t, tt.b, tt.rows)
			golden.Check(t, filepath.Join("testdata", tt.name+".xlsx.txt"), dumpXLSX(t, x))
			assertSameSummary(t, cs, xs)
			j, js := writeJSON(t, tt.b, tt.rows)
			golden.Check(t, filepath.Join("testdata", tt.name+".json"), j)
			golden.Check(t, filepath.Join("testdata", tt.name+".txt"), summaryText(t, cs))
			assertSameSummary(t, cs, js)
			ss, err := Summarize(tt.b, FromSlice(tt.rows))
			if err != nil {
				t.Fatal(err)
			}
			assertSameSummary(t, cs, ss)
		})
	}
	t.Run("errors", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteErrorsCSV(&buf, slices.Values(errorRows())); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", "errors.csv"), buf.Bytes())
	})
}

func assertSameSummary(t *testing.T, a, b Summary) {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Errorf("summaries differ:\n%s\n%s", ja, jb)
	}
}

func TestSummary(t *testing.T) {
	mismatch, mb := mismatchRows()
	tests := []struct {
		name           string
		b              Batch
		rows           []Row
		wantReconciled bool
		wantFinal      bool
		wantStates     []string
	}{
		{"every state", batchOf("b", "f", mixedRows()), mixedRows(), true, false, states},
		{"all final", batchOf("b", "f", centsRows()), centsRows(), true, true, states},
		{"sum and count differ", mb, mismatch, false, true, states},
		{"count differs", Batch{Rows: 4, Total: sumRows(mismatch)}, mismatch, false, true, states},
		{"sum differs", Batch{Rows: 3, Total: amt("99.71")}, mismatch, false, true, states},
		{"empty batch", Batch{Total: money.Zero}, nil, true, true, states},
		{"unknown states", Batch{Rows: 3, Total: amt("3")}, []Row{
			{Line: 1, State: "paused", Amount: amt("1")},
			{Line: 2, State: "", Amount: amt("1")},
			{Line: 3, State: string(lifecycle.Created), Amount: amt("1")},
		}, true, false, append(slices.Clone(states), noState, "paused")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Summarize(tt.b, FromSlice(tt.rows))
			if err != nil {
				t.Fatal(err)
			}
			if s.Reconciled != tt.wantReconciled || s.Final != tt.wantFinal {
				t.Errorf("reconciled, final = %v, %v; want %v, %v", s.Reconciled, s.Final, tt.wantReconciled, tt.wantFinal)
			}
			var states []string
			rows, cents := 0, int64(0)
			for _, st := range s.ByState {
				states = append(states, st.State)
				rows += st.Rows
				cents += st.Amount.Minor(2)
				// Each state's total, recomputed from the rows.
				var want int64
				n := 0
				for _, r := range tt.rows {
					if r.State == st.State || (r.State == "" && st.State == noState) {
						want += r.Amount.Minor(2)
						n++
					}
				}
				if st.Rows != n || st.Amount.Minor(2) != want {
					t.Errorf("state %s: %d rows %s, want %d rows %d cents", st.State, st.Rows, st.Amount, n, want)
				}
			}
			if !slices.Equal(states, tt.wantStates) {
				t.Errorf("states %v, want %v", states, tt.wantStates)
			}
			if rows != len(tt.rows) || s.Rows != len(tt.rows) {
				t.Errorf("rows: by state %d, total %d, want %d", rows, s.Rows, len(tt.rows))
			}
			if s.Total.Cmp(sumRows(tt.rows)) != 0 || cents != sumRows(tt.rows).Minor(2) {
				t.Errorf("total %s, states sum %d cents, want %s", s.Total, cents, sumRows(tt.rows))
			}
		})
	}
}

// TestExactCents shows that amounts a float64 sum gets wrong reconcile to
// the cent.
func TestExactCents(t *testing.T) {
	const n = 100_000
	rows := make([]Row, n)
	var f float64
	for i := range rows {
		a, fa := "0.10", 0.10
		if i%2 == 1 {
			a, fa = "0.20", 0.20
		}
		rows[i] = Row{Line: i + 2, Amount: amt(a), State: string(lifecycle.Created)}
		f += fa
	}
	const want = "15000.00"
	if strconv.FormatFloat(f, 'f', -1, 64) == "15000" {
		t.Fatalf("float64 sum is exact (%v): the test data does not show anything", f)
	}
	b := Batch{Rows: n, Total: amt(want), Scale: 2}
	var buf bytes.Buffer
	s, err := WriteCSVWith(&buf, b, FromSlice(rows), CSVOptions{SummaryInCSV: true})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Reconciled || s.Total.StringFixed(2) != want {
		t.Errorf("total %s reconciled %v, want %s reconciled (float64 gives %v)", s.Total, s.Reconciled, want, f)
	}
	wantLine := "# reconciliation,total of states," + want + ",file total," + want + ",rows,100000,file rows,100000,OK,,,\n" // padded to the header's 13 columns
	if !bytes.HasSuffix(buf.Bytes(), []byte(wantLine)) {
		t.Errorf("output does not end with %q", wantLine)
	}
}

// TestCSVParsesBack reads the result file with encoding/csv's default
// Reader: one rectangular table, every cell as written, no cell starting
// with a formula character, and the original value recovered by dropping
// one leading quote from neutralised cells.
func TestCSVParsesBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []Row
		b    Batch
	}{
		{"mixed", mixedRows(), batchOf("b-1", "=evil.csv", mixedRows())},
		{"outcomes", outcomeRows(), batchOf("b-2", "outcomes.csv", outcomeRows())},
		{"mismatch", func() []Row { r, _ := mismatchRows(); return r }(), func() Batch { _, b := mismatchRows(); return b }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, s := writeCSV(t, tc.b, tc.rows)
			recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatalf("encoding/csv cannot read the report: %v", err)
			}
			if !slices.Equal(recs[0], Header) {
				t.Fatalf("header %q", recs[0])
			}
			for _, rec := range recs {
				for _, cell := range rec {
					if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
						t.Errorf("cell %q starts with a formula character", cell)
					}
				}
			}
			data := recs[1 : 1+len(tc.rows)]
			for i, r := range tc.rows {
				want := []string{strconv.Itoa(r.Line), r.ExternalID, r.Amount.StringFixed(2), maskedFull(r.Destination), r.State,
					r.PSPOrderID, r.PSPStatus, strconv.Itoa(r.Attempts), maskedFull(r.Error), formatTime(r.UpdatedAt),
					r.ResolvedBy, maskedFull(r.ResolutionNote), GroupOf(r)}
				for j, cell := range data[i] {
					orig := cell
					if strings.HasPrefix(cell, "'") && want[j] != "" && strings.ContainsRune("=+-@\t\r", rune(want[j][0])) {
						orig = cell[1:]
					}
					if orig != want[j] {
						t.Errorf("line %d %s: read %q, want %q", r.Line, Header[j], cell, want[j])
					}
				}
			}
			if len(recs) != 1+len(tc.rows) {
				t.Fatalf("%d records, want the header and %d rows only", len(recs), len(tc.rows))
			}
			if bytes.Contains(out, []byte("\n\n")) || bytes.Contains(out, []byte("\n#")) {
				t.Errorf("the clean table holds a blank or '#' line:\n%s", out)
			}
			var legacy bytes.Buffer
			if _, err := WriteCSVWith(&legacy, tc.b, FromSlice(tc.rows), CSVOptions{SummaryInCSV: true}); err != nil {
				t.Fatal(err)
			}
			recs, err = csv.NewReader(bytes.NewReader(legacy.Bytes())).ReadAll()
			if err != nil {
				t.Fatalf("encoding/csv cannot read the report with --summary-in-csv: %v", err)
			}
			if !bytes.HasPrefix(legacy.Bytes(), out) {
				t.Errorf("--summary-in-csv does not start with the clean table")
			}
			trailer := recs[1+len(tc.rows):]
			// batch (2), states (header, states, total, awaiting), outcome
			// groups (header, groups, total), reconciliation.
			if want := 2 + (1 + len(s.ByState) + 2) + (1 + len(s.ByGroup) + 1) + 1; len(trailer) != want {
				t.Fatalf("trailer has %d lines, want %d", len(trailer), want)
			}
			for _, rec := range trailer {
				if !strings.HasPrefix(rec[0], "# ") {
					t.Errorf("trailer line %q does not start with '# '", rec)
				}
			}
			if got := trailer[1][2]; got != Neutralize(tc.b.File) {
				t.Errorf("file cell %q", got)
			}
			last := trailer[len(trailer)-1]
			verdict := map[bool]string{true: "OK", false: "MISMATCH"}[s.Reconciled]
			// The verdict stays in the 10th cell, where it was before the
			// resolution columns; only empty padding follows it.
			if last[0] != "# reconciliation" || last[9] != verdict || strings.Join(last[10:], "") != "" {
				t.Errorf("last line %q, want a reconciliation with %s in its 10th and last non-empty cell", last, verdict)
			}
		})
	}
}

// maskedFull is what a cell must hold: every full card number masked.
func maskedFull(s string) string {
	for _, pan := range []string{"4111111111111111", "4111 1111 1111 1111", "5555555555554444"} {
		s = strings.ReplaceAll(s, pan, map[string]string{
			"4111111111111111": "411111******1111", "4111 1111 1111 1111": "411111******1111", "5555555555554444": "555555******4444",
		}[pan])
	}
	return s
}

// cardLike finds runs of 12 to 19 digits, bare or in groups separated by
// single spaces or dashes, that are not part of a decimal amount.
var cardLike = regexp.MustCompile(`(?:^|[^\d.])(\d{12,19}|\d{4}(?:[ -]\d{4}){2}[ -]\d{1,7})(?:[^\d.]|$)`)

// TestNoCardNumber checks every output for a card-like run of digits that
// is not masked.
func TestNoCardNumber(t *testing.T) {
	b := batchOf("b", "f.csv", mixedRows())
	c, s := writeCSV(t, b, mixedRows())
	j, _ := writeJSON(t, b, mixedRows())
	x, _ := writeXLSX(t, b, mixedRows())
	var sum bytes.Buffer
	if err := WriteSummary(&sum, b, s); err != nil {
		t.Fatal(err)
	}
	var e bytes.Buffer
	if err := WriteErrorsCSV(&e, slices.Values(errorRows())); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string][]byte{"csv": c, "json": j, "text": summaryText(t, s), "errors": e.Bytes(),
		"xlsx": dumpXLSX(t, x), "summary": sum.Bytes()} {
		for _, m := range cardLike.FindAllSubmatch(out, -1) {
			// 202601150000123456 is a PSP order id, an identifier that is
			// written unchanged.
			if string(m[1]) != "202601150000123456" {
				t.Errorf("%s output holds %q", name, m[1])
			}
		}
		for _, pan := range []string{"4111111111111111", "4111 1111 1111 1111", "5555555555554444", "4111111111111112"} {
			if bytes.Contains(out, []byte(pan)) {
				t.Errorf("%s output holds the card number %s", name, pan)
			}
		}
	}
	// The check itself finds an unmasked number.
	if !cardLike.Match([]byte(`x,"card 4111 1111 1111 1111",y`)) || !cardLike.Match([]byte("4111111111111111")) {
		t.Fatal("cardLike does not match a card number")
	}
}

func TestNeutralize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"=1+1", "'=1+1"},
		{"+cmd", "'+cmd"},
		{"-1+1", "'-1+1"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\tx", "'\tx"},
		{"\rx", "'\rx"},
		{"'=already", "'=already"},
		{" =1", " =1"},
		{"a=b", "a=b"},
		{"10.50", "10.50"},
		{"PAY-1", "PAY-1"},
		{"\nx", "\nx"},
	}
	for _, tt := range tests {
		if got := Neutralize(tt.in); got != tt.want {
			t.Errorf("Neutralize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		a     money.Amount
		scale int
		want  string
	}{
		{amt("10.5"), 2, "10.50"},
		{amt("10"), 2, "10.00"},
		{money.MustParse("0.125"), 2, "0.125"}, // never rounded
		{money.MustParse("7"), 0, "7"},
		{money.MustParse("7.5"), 0, "7.5"},
		{money.MustParse("1.1"), 3, "1.100"},
		{money.MustParse("999999999999999.99"), 2, "999999999999999.99"},
		{money.Amount{}, 2, "0.00"},
		{money.Zero, -1, "0"},
	}
	for _, tt := range tests {
		if got := formatAmount(tt.a, tt.scale); got != tt.want {
			t.Errorf("formatAmount(%s, %d) = %q, want %q", tt.a, tt.scale, got, tt.want)
		}
	}
}

func TestOrder(t *testing.T) {
	tests := []struct {
		name     string
		lines    []int
		wantErr  bool
		line     int
		previous int
	}{
		{"increasing with gaps", []int{2, 3, 7, 100}, false, 0, 0},
		{"repeated line", []int{2, 3, 3}, true, 3, 3},
		{"backwards", []int{2, 5, 4}, true, 4, 5},
	}
	writers := map[string]func(io.Writer, Batch, iter.Seq2[Row, error]) (Summary, error){"csv": WriteCSV, "json": WriteJSON}
	for _, tt := range tests {
		for wname, write := range writers {
			t.Run(tt.name+"/"+wname, func(t *testing.T) {
				var rows []Row
				for _, l := range tt.lines {
					rows = append(rows, Row{Line: l, State: string(lifecycle.Created), Amount: amt("1")})
				}
				_, err := write(io.Discard, Batch{ID: "b-order"}, FromSlice(rows))
				if !tt.wantErr {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				var oe *OrderError
				if !errors.Is(err, ErrOrder) || !errors.As(err, &oe) {
					t.Fatalf("err = %v, want an OrderError", err)
				}
				if oe.Line != tt.line || oe.Previous != tt.previous || oe.Batch != "b-order" {
					t.Errorf("OrderError %+v, want line %d previous %d", oe, tt.line, tt.previous)
				}
			})
		}
	}
}

var errSource = errors.New("redis: connection reset")

func failingSource(after int) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for i := range after {
			if !yield(Row{Line: i + 1, State: string(lifecycle.Queued), Amount: amt("1")}, nil) {
				return
			}
		}
		yield(Row{}, errSource)
	}
}

func TestSourceError(t *testing.T) {
	b := Batch{ID: "b-src", Rows: 5, Total: amt("5")}
	for name, run := range map[string]func() error{
		"summarize": func() error { _, err := Summarize(b, failingSource(2)); return err },
		"csv":       func() error { _, err := WriteCSV(io.Discard, b, failingSource(2)); return err },
		"json":      func() error { _, err := WriteJSON(io.Discard, b, failingSource(2)); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := run()
			if !errors.Is(err, errSource) {
				t.Fatalf("err = %v, want it to wrap the source's error", err)
			}
			if !strings.Contains(err.Error(), "b-src") {
				t.Errorf("err %q does not name the batch", err)
			}
		})
	}
}

var errDisk = errors.New("disk full")

// failAfter accepts n bytes, then fails.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		n := f.n
		f.n = 0
		return n, errDisk
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	rows := centsRows()
	b := batchOf("b", "f", rows)
	for _, limit := range []int{0, 100, 400} {
		for name, run := range map[string]func(io.Writer) error{
			"csv":    func(w io.Writer) error { _, err := WriteCSV(w, b, FromSlice(rows)); return err },
			"json":   func(w io.Writer) error { _, err := WriteJSON(w, b, FromSlice(rows)); return err },
			"xlsx":   func(w io.Writer) error { _, err := WriteXLSX(w, b, FromSlice(rows)); return err },
			"text":   func(w io.Writer) error { return WriteSummaryText(w, Summary{Total: money.Zero, FileTotal: money.Zero}) },
			"errors": func(w io.Writer) error { return WriteErrorsCSV(w, slices.Values(errorRows())) },
		} {
			if name == "text" && limit > 0 {
				continue
			}
			if err := run(&failAfter{n: limit}); !errors.Is(err, errDisk) {
				t.Errorf("%s with a writer failing after %d bytes: err = %v, want %v", name, limit, err, errDisk)
			}
		}
	}
}

func TestJSON(t *testing.T) {
	rows := mixedRows()
	b := batchOf("b-json", "a<b>&c.csv", rows)
	out, s := writeJSON(t, b, rows)
	var doc struct {
		Batch   map[string]any   `json:"batch"`
		Rows    []map[string]any `json:"rows"`
		Summary map[string]any   `json:"summary"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("output is not JSON: %v", err)
	}
	if doc.Batch["file"] != "a<b>&c.csv" || doc.Batch["total"] != b.Total.StringFixed(2) {
		t.Errorf("batch %v", doc.Batch)
	}
	if len(doc.Rows) != len(rows) {
		t.Fatalf("%d rows, want %d", len(doc.Rows), len(rows))
	}
	for i, r := range doc.Rows {
		var keys []string
		for k := range r {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(Header))
		if !slices.Equal(keys, want) {
			t.Fatalf("row keys %v, want %v", keys, want)
		}
		if r["amount"] != rows[i].Amount.StringFixed(2) {
			t.Errorf("row %d amount %#v, want the string %q", i, r["amount"], rows[i].Amount.StringFixed(2))
		}
		if r["externalId"] != rows[i].ExternalID {
			t.Errorf("row %d externalId %q, want %q unchanged", i, r["externalId"], rows[i].ExternalID)
		}
		if r["error"] != maskedFull(rows[i].Error) {
			t.Errorf("row %d error %q, want %q", i, r["error"], maskedFull(rows[i].Error))
		}
		if wantNull := rows[i].UpdatedAt.IsZero(); (r["updatedAt"] == nil) != wantNull {
			t.Errorf("row %d updatedAt %v", i, r["updatedAt"])
		}
	}
	if doc.Summary["total"] != s.Total.StringFixed(2) || doc.Summary["reconciled"] != true || doc.Summary["final"] != false {
		t.Errorf("summary %v", doc.Summary)
	}
}

var streamRows = flag.Int("stream-rows", 200_000, "rows written by TestStreamingMemory (e.g. 1000000)")

// TestStreamingMemory writes a large batch and checks that the live heap
// does not grow with the number of rows written.
func TestStreamingMemory(t *testing.T) {
	n := *streamRows
	if testing.Short() {
		n = 50_000
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var early, late uint64
	rows := func(yield func(Row, error) bool) {
		r := Row{ExternalID: "PAY-000000", Amount: amt("12.34"), Destination: "411111******1111", State: string(lifecycle.Created),
			PSPOrderID: "ord-000000", PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt,
			Error: "an error message long enough to make retained rows visible in the heap"}
		for i := range n {
			switch i {
			case n / 10:
				early = heap()
			case n - 1:
				late = heap()
			}
			r.Line = i + 2
			if !yield(r, nil) {
				return
			}
		}
	}
	for name, write := range map[string]func(io.Writer, Batch, iter.Seq2[Row, error]) (Summary, error){"csv": WriteCSV, "json": WriteJSON} {
		t.Run(name, func(t *testing.T) {
			var size countingWriter
			s, err := write(&size, Batch{Rows: n, Total: money.FromMinor(int64(n)*1234, 2), Scale: 2}, rows)
			if err != nil {
				t.Fatal(err)
			}
			if !s.Reconciled {
				t.Errorf("not reconciled: %s vs %s", s.Total, s.FileTotal)
			}
			// Retaining even 1/10 of what was written would show.
			grown := int64(late) - int64(early)
			if limit := int64(size) / 10; grown > limit {
				t.Errorf("heap grew by %d bytes while writing %d rows (%d bytes); limit %d", grown, n, size, limit)
			}
			t.Logf("%d rows, %d bytes written, heap %d -> %d", n, size, early, late)
		})
	}
}

type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func BenchmarkWriteCSV(b *testing.B) {
	const n = 100_000
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{Line: i + 2, ExternalID: "PAY-" + strconv.Itoa(i), Amount: money.FromMinor(int64(i%100000+1), 2),
			Destination: "411111******1111", State: states[i%len(states)], PSPOrderID: "ord-" + strconv.Itoa(i),
			PSPStatus: "SUCCESS", Attempts: 1, UpdatedAt: updatedAt}
		if i%10 == 0 {
			rows[i].Error = "PSP said: card 4111111111111111 is blocked"
		}
	}
	batch := Batch{ID: "bench", Rows: n, Total: sumRows(rows), Scale: 2}
	b.ReportAllocs()
	for b.Loop() {
		s, err := WriteCSV(io.Discard, batch, FromSlice(rows))
		if err != nil || !s.Reconciled {
			b.Fatal(err, s.Reconciled)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

// TestOutcomeGroups: every row is in one group, the groups add up to the
// file's total to the cent, and each row lands where docs/operations.md
// says.
func TestOutcomeGroups(t *testing.T) {
	rows := outcomeRows()
	want := map[string]string{
		"OUT-1": GroupPaid, "OUT-2": GroupPaid, "OUT-3": GroupFailed, "OUT-4": GroupFailed,
		"OUT-5": GroupPending, "OUT-6": GroupUnknown, "OUT-7": GroupNotSent, "OUT-8": GroupUnknown,
		"OUT-9": GroupNotSent, "OUT-10": GroupNotSent, "OUT-11": GroupUnknown, "OUT-12": GroupNotSent,
		"OUT-13": GroupPending, "OUT-14": GroupPending, "OUT-15": GroupPending, "OUT-16": GroupReturned,
	}
	cents := map[string]int64{}
	for _, r := range rows {
		g := GroupOf(r)
		if g != want[r.ExternalID] {
			t.Errorf("%s (%s, order %q): group %s, want %s", r.ExternalID, r.State, r.PSPOrderID, g, want[r.ExternalID])
		}
		cents[g] += r.Amount.Minor(2)
	}
	b := batchOf("b", "f", rows)
	s, err := Summarize(b, FromSlice(rows))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var sum int64
	for _, g := range s.ByGroup {
		names = append(names, g.Group)
		if g.Amount.Minor(2) != cents[g.Group] {
			t.Errorf("group %s: %s, want %d cents", g.Group, g.Amount, cents[g.Group])
		}
		sum += g.Amount.Minor(2)
	}
	if !slices.Equal(names, Groups) {
		t.Errorf("groups %v, want %v", names, Groups)
	}
	if sum != b.Total.Minor(2) || s.GroupsTotal.Cmp(b.Total) != 0 || !s.Reconciled {
		t.Errorf("groups add up to %d cents (%s), file total %s, reconciled %v", sum, s.GroupsTotal, b.Total, s.Reconciled)
	}
	if s.Final || s.Awaiting.Rows != 1 || s.Awaiting.Amount.StringFixed(2) != "12.34" {
		t.Errorf("final %v, awaiting %+v", s.Final, s.Awaiting)
	}
	// Only the awaiting row left open: still not final; settled: final.
	open := []Row{rows[0], rows[4]}
	if s, _ := Summarize(batchOf("b", "f", open), FromSlice(open)); s.Final {
		t.Error("a batch with a created row awaiting its outcome is final")
	}
	open[1].Awaiting = false
	if s, _ := Summarize(batchOf("b", "f", open), FromSlice(open)); !s.Final {
		t.Error("a batch of paid and created (not followed) rows is not final")
	}
}

// TestLeftForGood: paid minus returned is what left for good; the sums
// reconcile to the cent.
func TestLeftForGood(t *testing.T) {
	rows := outcomeRows()
	s, err := Summarize(batchOf("b", "f", rows), FromSlice(rows))
	if err != nil {
		t.Fatal(err)
	}
	l, ok := s.LeftForGood()
	if !ok || l.Paid.Minor(2) != 10030 || l.Returned.String() != "19.99" || l.Sent.String() != "120.29" || !s.Reconciled {
		t.Fatalf("left for good %+v (%v), reconciled %v", l, ok, s.Reconciled)
	}
	if _, ok := (Summary{}).LeftForGood(); ok {
		t.Fatal("a summary without returned rows has a left-for-good line")
	}
}
