//go:build integration

package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/sandbox"
)

// TestNoReplicaAcknowledgementSendsNothing asks for one replica's
// acknowledgement of the submitting mark on a master that has none: no
// create may leave, and after the budget of tries that provably sent
// nothing the payout needs review.
func TestNoReplicaAcknowledgementSendsNothing(t *testing.T) {
	cfg := fastConfig()
	cfg.WaitReplicas, cfg.WaitTimeout, cfg.MaxCreateRetries = 1, 50*time.Millisecond, 2
	h := newHarness(t, cfg, sandbox.Config{})
	ids := h.add(visa)
	h.start()
	h.waitFinal(30 * time.Second)
	p := h.payout(ids[0])
	if p.State != lifecycle.NeedsReview || !strings.Contains(p.Error, "replicas acknowledged") {
		t.Fatalf("state %s (%q), want needs_review for lack of acknowledgement", p.State, p.Error)
	}
	h.assertOrders(ids[0], 0, 0)
}
