package worker

import "testing"

// TestEpochsObserve: a proceed that answers an epoch no higher than one
// seen before the call was sent means the ledger went back in time; calls
// in flight together answer out of order without a false alarm, and 0
// (no epoch: a decision that was not a proceed) says nothing.
func TestEpochsObserve(t *testing.T) {
	type call struct {
		batch     string
		floor     int64 // -1: the floor read now
		got       int64
		wentBack  bool
		wantFloor int64 // the batch's floor after the call
	}
	for _, tc := range []struct {
		name  string
		calls []call
	}{
		{"increasing", []call{{"b", -1, 1, false, 1}, {"b", -1, 2, false, 2}, {"b", -1, 7, false, 7}}},
		{"back to an older value", []call{{"b", -1, 1, false, 1}, {"b", -1, 5, false, 5}, {"b", -1, 1, true, 5}}},
		{"the same value again", []call{{"b", -1, 3, false, 3}, {"b", -1, 3, true, 3}}},
		{"two in flight answer out of order", []call{{"b", 0, 2, false, 2}, {"b", 0, 1, false, 2}}},
		{"batches apart", []call{{"a", -1, 9, false, 9}, {"b", -1, 1, false, 1}}},
		{"no epoch", []call{{"b", -1, 4, false, 4}, {"b", -1, 0, false, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e epochs
			for i, c := range tc.calls {
				floor := c.floor
				if floor < 0 {
					floor = e.floor(c.batch)
				}
				if got := e.observe(c.batch, floor, c.got); got != c.wentBack {
					t.Fatalf("call %d (%+v): went back %v, want %v", i, c, got, c.wentBack)
				}
				if f := e.floor(c.batch); f != c.wantFloor {
					t.Fatalf("call %d: floor %d, want %d", i, f, c.wantFloor)
				}
			}
		})
	}
}
