package sandbox_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/sandbox"
)

// TestReturnAfterPaid: with --p-return 1 a paid order reports, ReturnAfter
// after it was paid, the returned word with a reason and its time, in its
// status answer and in a callback of its own.
func TestReturnAfterPaid(t *testing.T) {
	recv := &cbReceiver{}
	sb, base, clock, _ := startCallbacks(t, recv, func(c *sandbox.Config) {
		c.PReturn, c.ReturnAfter, c.ReturnedStatus = 1, time.Hour, "REVERSED"
	})
	createWD(t, base, "E1")
	o := sb.Orders()[0]
	if o.ReturnAt.Sub(o.FinalAt) != time.Hour || o.ReturnStatus != "REVERSED" || !slices.Contains(sandbox.ReturnReasons, o.ReturnReason) {
		t.Fatalf("order %+v: want a return 1h after paid", o)
	}
	clock.Add(2 * time.Second)
	if _, a, body := getStatus(t, base, o.PSPOrderID); a.Status != "Paid" || strings.Contains(body, "returnedAt") {
		t.Fatalf("at paid: %s", body)
	}
	clock.Add(time.Hour)
	_, a, body := getStatus(t, base, o.PSPOrderID)
	if a.Status != "REVERSED" || a.StatusReason != o.ReturnReason || !strings.Contains(body, `"returnedAt":"`+o.ReturnAt.UTC().Format(time.RFC3339)+`"`) {
		t.Fatalf("after the return: %s", body)
	}
	testenv.Eventually(t, "the return's callback", func() bool {
		for _, c := range recv.received() {
			if c.Body["status"] == "REVERSED" && c.Body["statusReason"] == o.ReturnReason && c.Body["externalId"] == "E1" {
				return true
			}
		}
		return false
	})
	if st := sb.Stats(); st.Returned != 1 || st.Paid != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestReturnValidate(t *testing.T) {
	c := sandbox.DefaultConfig()
	c.PReturn = 0.5
	if err := c.Validate(); err == nil {
		t.Fatal("p-return without settle-after and return-after accepted")
	}
	c.SettleAfter, c.ReturnAfter = time.Second, time.Minute
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.ReturnedStatus = "Paid"
	if err := c.Validate(); err == nil {
		t.Fatal("returned-status equal to the paid word accepted")
	}
}
