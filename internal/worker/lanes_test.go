package worker

import (
	"slices"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/sandbox"
)

func TestLaneShares(t *testing.T) {
	for _, tc := range []struct {
		concurrency, lanes int
		want               []int
	}{
		{10, 4, []int{3, 3, 2, 2}},
		{50, 4, []int{13, 13, 12, 12}},
		{8, 4, []int{2, 2, 2, 2}},
		{2, 4, []int{1, 1}}, // never a lane without a slot
		{7, 1, []int{7}},
		{7, 0, []int{7}}, // at least one lane
	} {
		got := LaneShares(tc.concurrency, tc.lanes)
		if !slices.Equal(got, tc.want) {
			t.Errorf("LaneShares(%d, %d) = %v, want %v", tc.concurrency, tc.lanes, got, tc.want)
		}
	}
}

// TestLanesShareTheQueue: a worker of 3 lanes and concurrency 7 runs three
// Asynq servers whose concurrency adds up to 7; every payout is created
// exactly once; once Run has returned no lane is registered (a lane left
// running would go on taking tasks).
func TestLanesShareTheQueue(t *testing.T) {
	cfg := fastConfig()
	cfg.Concurrency, cfg.Lanes = 7, 3
	h := newHarness(t, cfg, sandbox.Config{})
	ids := h.add(slices.Repeat([]string{visa}, 30)...)
	h.start()
	h.waitFor("three lanes registered", 10*time.Second, func() bool {
		ss, err := h.insp.Servers()
		return err == nil && len(ss) == 3
	})
	ss, err := h.insp.Servers()
	if err != nil {
		t.Fatal(err)
	}
	var shares []int
	for _, s := range ss {
		shares = append(shares, s.Concurrency)
	}
	slices.Sort(shares)
	if !slices.Equal(shares, []int{2, 2, 3}) {
		t.Errorf("lanes' concurrency %v, want [2 2 3]", shares)
	}
	if c := h.waitFinal(20 * time.Second); c.Rows[lifecycle.Created] != int64(len(ids)) {
		t.Fatalf("created %d of %d: %+v", c.Rows[lifecycle.Created], len(ids), c.Rows)
	}
	for _, ext := range ids {
		h.assertOrders(ext, 1, 1)
	}

	h.stop()
	if ss, err := h.insp.Servers(); err != nil || len(ss) != 0 {
		t.Fatalf("after Run returned: %d servers registered (%v), want none", len(ss), err)
	}
}
