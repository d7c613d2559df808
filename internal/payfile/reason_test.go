package payfile

import (
	"context"
	"strings"
	"testing"
)

// TestReasonColumnIgnored: the reason column of a retry file (payout
// report --failed-only) loads and is never sent: no extra property comes
// of it, whatever it holds.
func TestReasonColumnIgnored(t *testing.T) {
	file := "externalId,amount,cardNumber,telecomOperator,phoneNumber,reason\n" +
		"PO-1-R1,10.50,4111 1111 1111 1111,,,PSP status Failed: card expired\n" +
		"PO-2-R1,2.00,,MTS,+79001234567,\"=HYPERLINK(\"\"x\"\")\"\n"
	var rows []Row
	sum, errs, err := CollectEach(context.Background(), "retry.csv", strings.NewReader(file), Options{}, func(r Row) error {
		rows = append(rows, r)
		return nil
	})
	if err != nil || len(errs) > 0 || sum.ValidRows != 2 {
		t.Fatalf("%+v %v %v", sum, errs, err)
	}
	for _, r := range rows {
		for _, p := range r.Extra {
			if p.Key == ColReason {
				t.Errorf("line %d: reason sent as a property: %+v", r.Line, r.Extra)
			}
		}
	}
	if len(rows[1].Extra) != 1 || rows[1].Extra[0].Key != "phoneNumber" {
		t.Errorf("extras of line 3: %+v", rows[1].Extra)
	}
}
