package lifecycle

import "testing"

// TestReturnedFollowsPaidOnly: a payout is returned only after it was
// paid, only by a worker's watch check, and returned is final: nothing
// leaves it.
func TestReturnedFollowsPaidOnly(t *testing.T) {
	for _, tc := range []struct {
		from State
		by   Role
		want bool
	}{
		{Paid, RoleWorker, true},
		{Paid, RoleReconciler, false},
		{Paid, RolePerson, false},
		{Created, RoleWorker, false},
		{Failed, RoleWorker, false},
		{"", RoleLoader, false},
	} {
		if got := Allowed(tc.from, Returned, tc.by); got != tc.want {
			t.Errorf("Allowed(%q -> returned by %s) = %v, want %v", tc.from, tc.by, got, tc.want)
		}
	}
	if !Returned.Final() || Returned.Open() {
		t.Errorf("returned: Final %v, Open %v; want final, not open", Returned.Final(), Returned.Open())
	}
	for _, tr := range Transitions {
		if tr.From == Returned {
			t.Errorf("move %s -> %s: returned is final, nothing leaves it", tr.From, tr.To)
		}
	}
	if States[0] != Paid || States[1] != Returned {
		t.Errorf("States begin %v; want paid, then returned (reports list what left, then what came back)", States[:2])
	}
	if Returned.Label() != "returned" {
		t.Errorf("label %q", Returned.Label())
	}
}
