//go:build integration

package report

import (
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/proof/testenv"
)

// TestXLSXInLibreOffice opens the workbook in LibreOffice Calc (headless,
// converted to CSV as shown) and checks that every amount shows exactly,
// with the batch's decimals, on both sheets.
func TestXLSXInLibreOffice(t *testing.T) {
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		testenv.Missing(t, "soffice (libreoffice-calc) is not installed")
	}
	// 9999999999999.99 in a number cell shows as 10000000000000.00 in
	// LibreOffice: such amounts are text cells.
	amounts := []string{"0.10", "0.20", "2775.50", "11474.10", "999999999999.99", "9999999999999.99", "1234567890123.45",
		"99999999999999.90", "999999999999999.00", "123456789012345.67"}
	var rows []Row
	for i, a := range amounts {
		rows = append(rows, Row{Line: i + 2, ExternalID: "X-" + a, Amount: money.MustParse(a), Destination: "411111******1111", State: string(lifecycle.Paid)})
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "r.xlsx")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteXLSX(f, batchOf("b", "r.csv", rows), FromSlice(rows)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The first sheet, as Calc shows its cells.
	cmd := exec.CommandContext(ctx, soffice, "-env:UserInstallation=file://"+filepath.Join(dir, "profile"), "--headless",
		"--convert-to", "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true,false", "--outdir", dir, path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.csv"))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(recs) != len(rows)+1 {
		t.Fatalf("%v\n%s", err, b)
	}
	for i, a := range amounts {
		if got := recs[i+1][2]; got != a {
			t.Errorf("LibreOffice shows %q for %s", got, a)
		}
	}
}
