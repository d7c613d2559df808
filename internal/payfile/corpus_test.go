package payfile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
)

// corpusOptions are the options the bad-input corpus is checked with: a
// maximum amount, and a line bound small enough for committed files.
var corpusOptions = Options{MaxAmount: money.MustParse("1000000.00"), MaxLineBytes: 4096}

// listing checks path and returns its summary and its sorted error listing
// in String form, one error a line, FILE being the base name. It fails the
// test when checking takes longer than the deadline.
func listing(t *testing.T, path string, opts Options, deadline time.Duration) (Summary, string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type result struct {
		sum  Summary
		errs []Error
		err  error
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	go func() {
		sum, errs, err := Collect(ctx, filepath.Base(path), f, opts)
		done <- result{sum, errs, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(deadline + time.Second):
		t.Fatalf("%s: no result after %v (hang?)", path, deadline)
	}
	if res.err != nil {
		t.Fatalf("%s: %v", path, res.err)
	}
	var b strings.Builder
	if err := WriteErrors(&b, res.errs); err != nil {
		t.Fatal(err)
	}
	return res.sum, b.String()
}

// TestBadCorpus checks every file of testdata/bad against its golden error
// listing: none may crash, hang or pass clean.
func TestBadCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 30 {
		t.Fatalf("only %d corpus files", len(files))
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".csv")
		t.Run(name, func(t *testing.T) {
			sum, got := listing(t, path, corpusOptions, 5*time.Second)
			if got == "" {
				t.Errorf("%s: no error found in a bad file", path)
			}
			if sum.Rows != sum.ValidRows+len(sum.BadLines) {
				t.Errorf("rows %d != valid %d + bad %d", sum.Rows, sum.ValidRows, len(sum.BadLines))
			}
			golden.CheckString(t, strings.TrimSuffix(path, ".csv")+".golden", got)
		})
	}
}

// peakHeap runs f while sampling HeapInuse, and returns the largest growth
// over the heap in use before f, and the bytes f allocated in all.
func peakHeap(f func()) (growth, allocated uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, alloc0 := ms.HeapInuse, ms.TotalAlloc
	var mu sync.Mutex
	peak := base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var s runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&s)
				mu.Lock()
				peak = max(peak, s.HeapInuse)
				mu.Unlock()
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapInuse)
	return peak - base, ms.TotalAlloc - alloc0
}

func writeTemp(t *testing.T, name string, write func(w *bufio.Writer)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	write(w)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

const mib = 1 << 20

// TestHugeLine: a 50 MB single line is refused after reading one line
// bound's worth of it, not the whole.
func TestHugeLine(t *testing.T) {
	path := writeTemp(t, "line.csv", func(w *bufio.Writer) {
		w.WriteString(hdr + "PO-1,1,,MTS\nPO-2,")
		chunk := bytes.Repeat([]byte("1234567890"), 1<<10)
		for written := 0; written < 50*mib; written += len(chunk) {
			w.Write(chunk)
		}
		w.WriteString(",,MTS\nPO-3,1,,MTS\n")
	})
	var got string
	var sum Summary
	start := time.Now()
	growth, allocated := peakHeap(func() { sum, got = listing(t, path, Options{}, 5*time.Second) })
	elapsed := time.Since(start)
	t.Logf("50 MB line: refused in %v, heap growth %.1f MiB, allocated %.1f MiB", elapsed, float64(growth)/mib, float64(allocated)/mib)
	if want := "line.csv:3: file: line is longer than 65536 bytes\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !sum.Aborted || sum.Rows != 1 {
		t.Errorf("summary %+v", sum)
	}
	if allocated > 32*mib || growth > 32*mib {
		t.Errorf("allocated %d bytes, heap grew %d bytes: the line was read into memory", allocated, growth)
	}
}

// TestHugeHeader: 10,000 columns are refused at once.
func TestHugeHeader(t *testing.T) {
	path := writeTemp(t, "cols.csv", func(w *bufio.Writer) {
		for i := range 10000 {
			if i > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(w, "column_%05d", i) // 120 KB in all: over the default line bound
		}
		w.WriteString("\n")
		for i := range 10000 {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteByte('1')
		}
		w.WriteString("\n")
	})
	var got string
	start := time.Now()
	growth, allocated := peakHeap(func() { _, got = listing(t, path, Options{MaxLineBytes: 1 << 20}, 5*time.Second) })
	t.Logf("10,000 columns: refused in %v, heap growth %.1f MiB, allocated %.1f MiB", time.Since(start), float64(growth)/mib, float64(allocated)/mib)
	want := "cols.csv:1: header: has 10000 columns, at most 25 are allowed: externalId, amount, cardNumber, telecomOperator, phoneNumber and 20 other columns kept as information\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if allocated > 8*mib {
		t.Errorf("allocated %d bytes for a refused header", allocated)
	}
	// With the default line bound the header line itself is too long.
	_, got = listing(t, path, Options{}, 5*time.Second)
	if want := "cols.csv:1: file: line is longer than 65536 bytes\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestMillionRows validates a 1,000,000-row file (fewer under -race or
// -short) with one duplicate at the end, which forces the second read, in
// bounded memory.
func TestMillionRows(t *testing.T) {
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	path := writeTemp(t, "million.csv", func(w *bufio.Writer) {
		w.WriteString(generate(0, nil)) // the header
		for i := range n {
			id := i
			if i == n-1 {
				id = 17 // duplicate of the 18th row
			}
			fmt.Fprintf(w, "PO-%07d,%d.%02d,4111 1111 1111 1111,\n", id, 1+i%5000, i%100)
		}
	})
	var sum Summary
	var got string
	start := time.Now()
	growth, allocated := peakHeap(func() { sum, got = listing(t, path, Options{}, 120*time.Second) })
	elapsed := time.Since(start)
	t.Logf("%d rows: checked in %v (%.0f rows/s, two reads), heap growth %.1f MiB, allocated %.0f MiB",
		n, elapsed, float64(n)/elapsed.Seconds(), float64(growth)/mib, float64(allocated)/mib)
	want := fmt.Sprintf("million.csv:%d: externalId: \"PO-0000017\" already appears on line 19\n", n+1)
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if sum.Rows != n || sum.ValidRows != n-1 || len(sum.BadLines) != 1 {
		t.Errorf("summary rows %d valid %d bad %v", sum.Rows, sum.ValidRows, sum.BadLines)
	}
	if growth > 48*mib {
		t.Errorf("heap grew by %d bytes", growth)
	}
}
