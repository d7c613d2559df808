//go:build payout_unsafe_skip_submitting_check

package worker

// skipSubmittingCheck makes a create task that finds its payout in
// submitting or checking POST again, as a naive worker would. Only the chaos
// suite builds this, to prove that it detects duplicate orders. Never ship.
const skipSubmittingCheck = true
