package payfile

import (
	"testing"

	"github.com/shopspring/decimal"
)

// TestNumberFormatProblem: a format that only adds a currency, a locale's
// separators or padding to an exact value shows it; one that rounds,
// scales or shows a date, a time, a fraction or an exponent does not.
func TestNumberFormatProblem(t *testing.T) {
	for _, tt := range []struct {
		code, value string
		want        string // "" when the format shows the value exactly
	}{
		{"General", "48000", ""},
		{"General", "1500.5", ""},
		{"General", "123456789012.5", "the General format, which shows at most 11 digits"},
		{"@", "48000", ""},
		{"0", "48000", ""},
		{"0", "1500.5", "rounded to 0 decimal places"},
		{"0.00", "1500.5", ""},
		{"0.00", "0.125", "rounded to 2 decimal places"},
		{"0.0#", "1500.55", ""},
		{"#,##0.00", "48000", ""},
		{`#,##0.00" руб."`, "48000", ""},
		{`#,##0.00\ "руб."`, "48000", ""},
		{`#,##0.00 "руб."`, "48000", ""},
		{`#,##0.00 руб.`, "48000", ""},
		{`#,##0.00 [$€-407]`, "48000", ""},
		{`#,##0.00 [$€-407];[RED]-#,##0.00 [$€-407]`, "48000", ""},
		{`[$$-409]#,##0.00`, "48000", ""},
		{`$#,##0.00`, "48000", ""},
		{`"$"#,##0.00_);\("$"#,##0.00\)`, "48000", ""},
		{`"$"#,##0.00_);[Red]\("$"#,##0.00\)`, "-5", ""},
		{`_-* #,##0.00\ "€"_-;\-* #,##0.00\ "€"_-;_-* "-"??\ "€"_-;_-@_-`, "48000", ""},
		{`_(* #,##0.00_);_(* \(#,##0.00\);_(* "-"??_);_(@_)`, "12.5", ""},
		{`#,##0.00;(#,##0.00)`, "-12.5", ""},
		{`#,##0.00 €;-#,##0.00 €`, "48000.5", ""},
		{`00000.00`, "12.5", ""},
		{`[Red]0.00`, "12.5", ""},
		{`[Color10]0.00`, "12.5", ""},
		{`#,##0,`, "48000", "scaled by a thousand (a ',' after the digits)"},
		{`#,##0,"K"`, "48000", "scaled by a thousand (a ',' after the digits)"},
		{`0,.00`, "48000", "scaled by a thousand (a ',' before the decimal point)"},
		{"0%", "0.5", "a percentage"},
		{"0.00%", "0.5", "a percentage"},
		{"0.00E+00", "48000", "scientific notation (an exponent)"},
		{"##0.0E+0", "48000", "scientific notation (an exponent)"},
		{"# ?/?", "12.5", "a fraction or a date"},
		{"mm-dd-yy", "45306", "a date or a time"},
		{"d-mmm-yy", "45306", "a date or a time"},
		{"yyyy-mm-dd", "45306", "a date or a time"},
		{"h:mm", "0.5", "a date or a time"},
		{"[h]:mm:ss", "1.5", "a time"},
		{`[>=100]0.00;0.0`, "150", "a conditional format"},
		{`[DBNum1]0`, "150", "a special number format [DBNum1]"},
		{`"fixed"`, "150", "text without the number"},
		{`0.00;-0.00;"-"`, "0", "text without the number"},
		{`0.00;-0.00;"-"`, "5", ""},
		{`000-000`, "123456", "digits broken up by text"},
		{`0.00 USD`, "5", "a date or a time"},
		{`0.00 "USD"`, "5", ""},
		{`[$-419]#,##0.00`, "5", ""},
	} {
		got := numberFormatProblem(tt.code, decimal.RequireFromString(tt.value))
		if got != tt.want {
			t.Errorf("numberFormatProblem(%q, %s) = %q, want %q", tt.code, tt.value, got, tt.want)
		}
	}
}

func TestIsScientific(t *testing.T) {
	for in, want := range map[string]bool{
		"6.75964982643845E+018": true, "6.75964982643845E+18": true, "1e3": true, "-1.5E-2": true,
		"4111111111111111": false, "E+18": false, "1.5E": false, "PO-1E+1": false, "12.50": false, "1.2.3E4": false,
	} {
		if got := isScientific(in); got != want {
			t.Errorf("isScientific(%q) = %v", in, got)
		}
	}
}
