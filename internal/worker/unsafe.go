package worker

// Unsafe is a deliberately broken behaviour of the worker, for the proof
// of safety only: the chaos suite runs a worker that has one to prove that
// it detects the duplicate orders such a worker makes. The zero value, the
// only one the product uses, is the safe worker. A value with a broken
// behaviour comes only from UnsafeSkipSubmittingCheck, which only the
// harness's command internal/proof/cmd/payout-skipcheck calls (a test in
// internal/proof fails when any other product code does); no flag or
// environment variable reaches it.
type Unsafe struct {
	skipSubmittingCheck bool
}

// UnsafeSkipSubmittingCheck makes a create task that finds its payout in
// submitting or checking POST again, as a naive worker would, instead of
// checking the status. Never ship.
func UnsafeSkipSubmittingCheck() Unsafe {
	return Unsafe{skipSubmittingCheck: true}
}
