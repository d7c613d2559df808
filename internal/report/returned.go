package report

import "github.com/acme/payout/internal/money"

// LeftForGood is the money of a batch that was sent and stayed: what the
// PSP reported paid, and what it reported returned after paid.
type LeftForGood struct {
	Sent     money.Amount // paid + returned: every amount the PSP reported sent
	Returned money.Amount // came back after paid
	Paid     money.Amount // Sent - Returned: left for good
}

// LeftForGood sums the paid and returned groups of s; ok is false when no
// row of s was returned (the paid group says it all then).
func (s Summary) LeftForGood() (l LeftForGood, ok bool) {
	l = LeftForGood{Sent: money.Zero, Returned: money.Zero, Paid: money.Zero}
	for _, g := range s.ByGroup {
		switch g.Group {
		case GroupPaid:
			l.Paid = g.Amount
		case GroupReturned:
			l.Returned, ok = g.Amount, g.Rows > 0
		}
	}
	l.Sent = l.Paid.Add(l.Returned)
	return l, ok
}
