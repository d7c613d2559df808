package loader

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/payfile"
	"github.com/xuri/excelize/v2"
)

// writeWorkbook writes the rows of goodCSV as a workbook: text ids and
// cards, number amounts. creator changes the workbook's metadata only.
func writeWorkbook(t *testing.T, path, creator string) {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	rows := [][]any{
		{"externalId", "amount", "cardNumber", "telecomOperator"},
		{"A-1", 10.5, "4111 1111 1111 1111", nil},
		{"A-2", 20, nil, "MTS"},
		{"A-3", 0.01, "5555-5555-5555-4444", nil},
	}
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow("Sheet1", cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.SetDocProps(&excelize.DocProperties{Creator: creator}); err != nil {
		t.Fatal(err)
	}
	if err := f.SaveAs(path); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolLoadsAWorkbook: the spool takes an .xlsx like a CSV file, and
// the same data saved again (other metadata, so other bytes) is the same
// batch, not paid twice.
func TestSpoolLoadsAWorkbook(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, Inbox), 0o750)
	writeWorkbook(t, filepath.Join(dir, Inbox, "payouts.xlsx"), "finance")
	res, err := f.ld.Spool(ctx, dir, SpoolOptions{Delivery: DeliveryRename})
	if err != nil || len(res.Files) != 1 || !res.Files[0].Loaded || res.Files[0].Registered != 3 || res.Files[0].Total.String() != "30.51" {
		t.Fatalf("spool: %+v %v", res, err)
	}
	batch := res.Files[0].Batch
	if _, err := os.Stat(filepath.Join(dir, Done, "payouts.xlsx")); err != nil {
		t.Fatal(err)
	}
	p, err := f.led.Get(ctx, batch, "A-1")
	if err != nil || p.State != lifecycle.Queued || p.Destination != "card 411111******1111" || p.Line != 2 || p.Amount != "10.5" && p.Amount != "10.50" {
		t.Fatalf("ledger entry %+v %v", p, err)
	}

	resaved := filepath.Join(t.TempDir(), "payouts-resaved.xlsx")
	writeWorkbook(t, resaved, "someone else")
	a, _ := os.ReadFile(filepath.Join(dir, Done, "payouts.xlsx"))
	b, _ := os.ReadFile(resaved)
	if string(a) == string(b) {
		t.Fatal("the re-saved workbook has the same bytes: the test shows nothing")
	}
	again, err := f.ld.LoadFile(ctx, resaved, Options{})
	if err != nil || again.DuplicateOf == nil || again.DuplicateOf.ID != batch || again.Loaded {
		t.Fatalf("re-saved workbook: %+v %v", again, err)
	}
}

// TestWorkbookThatIsNotOne: a .xlsx that is not a workbook is refused with
// the reason, not an infrastructure error.
func TestWorkbookThatIsNotOne(t *testing.T) {
	f := newFixture(t)
	res, err := f.ld.LoadFile(context.Background(), writeFile(t, t.TempDir(), "a.xlsx", goodCSV), Options{})
	if err != nil || res.Loaded || len(res.Errors) != 1 || res.Errors[0].Column != "file" {
		t.Fatalf("%+v %v", res, err)
	}
}

// TestWorkbookHiddenRows: a workbook's hidden row is refused, naming it,
// and nothing is loaded; with IncludeHiddenRows it is loaded, and the
// result says the sheet shows one row fewer than it holds.
func TestWorkbookHiddenRows(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hidden.xlsx")
	writeWorkbook(t, path, "finance")
	x, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetRowVisible("Sheet1", 3, false); err != nil {
		t.Fatal(err)
	}
	if err := x.Save(); err != nil {
		t.Fatal(err)
	}
	x.Close()
	res, err := f.ld.LoadFile(ctx, path, Options{})
	if err != nil || res.Loaded || len(res.Errors) != 1 || res.Errors[0].Line != 3 || res.Errors[0].Column != "row" ||
		res.Sheet != "Sheet1" || res.Rows != 3 || res.HiddenRows != 1 {
		t.Fatalf("hidden row: %+v %v", res, err)
	}
	res, err = f.ld.LoadFile(ctx, path, Options{File: payfile.Options{IncludeHiddenRows: true}})
	if err != nil || !res.Loaded || res.Registered != 3 || res.Total.String() != "30.51" || res.HiddenRows != 1 {
		t.Fatalf("hidden row included: %+v %v", res, err)
	}
}
