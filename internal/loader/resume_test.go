package loader

import (
	"reflect"
	"testing"

	"github.com/acme/payout/internal/money"
	"github.com/acme/payout/internal/payfile"
)

// The approval policy recorded on a batch reads back as it was.
func TestPolicyRoundTrip(t *testing.T) {
	for _, a := range []Approval{
		{},
		{Required: true, FourEyes: true, By: "alice"},
		{AutoBelow: money.MustParse("100.5"), MaxBatchTotal: money.MustParse("1000000"), DailyLimit: money.MustParse("2500000.25")},
	} {
		got, err := decodePolicy(encodePolicy(a), a.By)
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		if got.Required != a.Required || got.FourEyes != a.FourEyes || got.By != a.By ||
			got.AutoBelow.Cmp(a.AutoBelow) != 0 || got.MaxBatchTotal.Cmp(a.MaxBatchTotal) != 0 || got.DailyLimit.Cmp(a.DailyLimit) != 0 {
			t.Errorf("policy %+v read back as %+v", a, got)
		}
	}
	if _, err := decodePolicy("required=maybe", ""); err == nil {
		t.Error("a broken policy was read")
	}
}

// The reading options: the same options encode the same (defaults written
// as what they mean), and each difference is named.
func TestReadingDiffs(t *testing.T) {
	base := Options{}
	same := Options{File: payfile.Options{Scale: 2}} // Scale 0 means 2 decimals
	if encodeReading(base) != encodeReading(same) {
		t.Errorf("scale 0 and 2 encode differently:\n%s\n%s", encodeReading(base), encodeReading(same))
	}
	other := Options{Partial: true, File: payfile.Options{AmountFormat: money.CommaDot, Scale: -1, Sheet: "Pay"}}
	got := readingDiffs(encodeReading(base), other)
	want := []string{"amount format plain (this run: comma-dot)", "decimals 2 (this run: 0)", "sheet (the first shown) (this run: Pay)", "partial false (this run: true)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("readingDiffs = %q, want %q", got, want)
	}
}
