//go:build payout_unsafe_replayable_create

package psp

// unsafeReplayableCreate gives a create request a GetBody, so that Go's
// HTTP/2 transport replays it by itself after a RST_STREAM REFUSED_STREAM
// or PROTOCOL_ERROR (or a GOAWAY) that came after the body was sent: a
// create sent twice (see noReplay). Only the chaos suite builds this
// (make chaos BROKEN=2), to prove that it detects the duplicate orders
// such a transport makes. Never ship.
const unsafeReplayableCreate = true
