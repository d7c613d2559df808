//go:build !payout_unsafe_replayable_create

package psp

// unsafeReplayableCreate is false in every real build: a create has no
// GetBody and is never replayed by the transport (see noReplay). The chaos
// suite builds a deliberately broken worker with the tag
// payout_unsafe_replayable_create to prove that its duplicate detector
// catches a transport that replays creates.
const unsafeReplayableCreate = false
