package payfile

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv/golden"
)

// corpusDir holds the files LibreOffice Calc wrote (testdata/corpus/gen.sh,
// make corpus) and the goldens of TestCorpus.
var corpusDir = filepath.Join("testdata", "corpus")

// TestCorpus reads every case of testdata/corpus/cases.txt, files as a
// spreadsheet program writes them, and compares the outcome (the errors,
// the summary, the rows) with its golden file.
func TestCorpus(t *testing.T) {
	f, err := os.Open(filepath.Join(corpusDir, "cases.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 2 {
			t.Fatalf("cases.txt: %q: want a golden name and a file", sc.Text())
		}
		name, file := fields[0], fields[1]
		used[file] = true
		var opts Options
		for _, o := range fields[2:] {
			k, v, _ := strings.Cut(o, "=")
			switch k {
			case "amount-format":
				if opts.AmountFormat, err = money.ParseFormat(v); err != nil {
					t.Fatalf("cases.txt: %s: %v", name, err)
				}
			case "sheet":
				opts.Sheet = v
			case "include-hidden-rows":
				opts.IncludeHiddenRows = true
			default:
				t.Fatalf("cases.txt: %s: unknown option %q", name, o)
			}
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(corpusDir, file)
			var sum Summary
			var got string
			if sum, got = listing(t, path, opts, 10*time.Second); sum.Aborted {
				got += "-- refused as a whole\n"
			} else {
				sum, got = fullListing(t, path, opts)
			}
			if sum.Sheet != "" && !sum.Aborted {
				got += fmt.Sprintf("-- sheet %s shows %d of its %d rows\n", sum.Sheet, sum.Rows-sum.HiddenRows, sum.Rows)
			}
			if !sum.Aborted {
				for _, w := range sum.Warnings {
					got += "-- warning: " + w + "\n"
				}
			}
			golden.CheckString(t, filepath.Join(corpusDir, name+".golden"), got)
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// Every corpus file is read by some case.
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch ext := filepath.Ext(e.Name()); {
		case slices.Contains([]string{".xlsx", ".ods", ".xls", ".csv"}, ext) && !used[e.Name()]:
			t.Errorf("%s is in no case of cases.txt", e.Name())
		}
	}
}
