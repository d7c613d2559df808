package psp

// Unsafe is a deliberately broken behaviour of the client, for the proof of
// safety only: the chaos suite runs a worker whose client has one to prove
// that it detects the duplicate orders it makes. The zero value, the only
// one the product uses, is the safe client. A value with a broken
// behaviour comes only from UnsafeReplayableCreate, which only the
// harness's command internal/proof/cmd/payout-replay calls (a test in
// internal/proof fails when any other product code does); no flag or
// environment variable reaches it.
type Unsafe struct {
	replayableCreate bool
}

// UnsafeReplayableCreate gives a create request a GetBody, so that Go's
// HTTP/2 transport replays it by itself after a RST_STREAM REFUSED_STREAM
// or PROTOCOL_ERROR (or a GOAWAY) that came after the body was sent: a
// create sent twice (see noReplay). Never ship.
func UnsafeReplayableCreate() Unsafe {
	return Unsafe{replayableCreate: true}
}
