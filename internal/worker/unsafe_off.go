//go:build !payout_unsafe_skip_submitting_check

package worker

// skipSubmittingCheck is false in every real build. The chaos suite builds a
// deliberately broken worker with the tag payout_unsafe_skip_submitting_check
// to prove that its duplicate detector can fail.
const skipSubmittingCheck = false
