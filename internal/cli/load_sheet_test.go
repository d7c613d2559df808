package cli

import (
	"flag"
	"testing"

	"github.com/acme/payout/internal/loader"
)

// TestSheetLine: a workbook's load output says how many rows its sheet
// shows and holds; a CSV's says nothing of it.
func TestSheetLine(t *testing.T) {
	for _, tt := range []struct {
		r    loader.Result
		want string
	}{
		{loader.Result{File: "p.xlsx", Sheet: "Sheet1", Rows: 10, HiddenRows: 2}, "p.xlsx: sheet Sheet1 shows 8 data rows and holds 10: 2 hidden or filtered out"},
		{loader.Result{File: "p.xlsx", Sheet: "Sheet1", Rows: 10}, "p.xlsx: sheet Sheet1 shows all its 10 data rows"},
		{loader.Result{File: "p.xlsx", Sheet: "Sheet1"}, ""},
		{loader.Result{File: "p.csv", Rows: 10}, ""},
	} {
		if got := sheetLine(tt.r); got != tt.want {
			t.Errorf("sheetLine(%+v) = %q, want %q", tt.r, got, tt.want)
		}
	}
}

// TestIncludeHiddenRowsFlag: --include-hidden-rows reaches the file
// options; without it hidden rows are refused.
func TestIncludeHiddenRowsFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--include-hidden-rows"}, true}} {
		var ff fileFlags
		fs := flag.NewFlagSet("load", flag.ContinueOnError)
		ff.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		o, err := ff.options()
		if err != nil || o.IncludeHiddenRows != tt.want {
			t.Errorf("%v: IncludeHiddenRows %v, %v; want %v", tt.args, o.IncludeHiddenRows, err, tt.want)
		}
	}
}
