package vault

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// A destination's tag is how the recipient velocity limit (the ledger's
// Velocity) knows a card number or a phone without holding it: the first
// 32 hex characters (128 bits) of HMAC-SHA256(tag key, destination), the
// tag key being HMAC-SHA256(data key, "payout destination tag v1"): a
// key of its own, derived from the data key the deployment has already,
// so that no second secret is to be handed out, and a tag is never the
// fingerprint or anything sealed. Without the data key a tag cannot be
// computed from a card number (a plain hash of the 10^9 possible numbers
// behind a known BIN and last four could be reversed in seconds).
//
// The tag follows the current key: after a rotation the same card has
// another tag, so the day's counts start again at the rotation
// (docs/controls.md). The Plaintext keyring (--insecure-plaintext, local
// trials only) tags with a fixed key: it protects nothing, like the rest
// of that mode.

// tagLabel is the HMAC message that derives the tag key from a data key.
const tagLabel = "payout destination tag v1"

// tagLen is the length of a tag in hex characters.
const tagLen = 32

func tagKey(raw []byte) []byte {
	m := hmac.New(sha256.New, raw)
	m.Write([]byte(tagLabel))
	return m.Sum(nil)
}

// plaintextTagKey is the tag key of the Plaintext keyring.
var plaintextTagKey = tagKey([]byte("payout insecure plaintext"))

// DestinationTag is the keyed hash of destination (a canonical form:
// "card:DIGITS", "phone:OPERATOR:DIGITS") under the current key.
func (k *Keyring) DestinationTag(destination string) string {
	key := plaintextTagKey
	if k != nil && !k.plaintext {
		key = k.tags[k.current]
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(destination))
	return hex.EncodeToString(m.Sum(nil))[:tagLen]
}
