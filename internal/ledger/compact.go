package ledger

import (
	"encoding/base64"
	"encoding/hex"
)

// A payout hash stays in Redis's compact listpack encoding only while every
// value is at most hash-max-listpack-value bytes (64 by default); one longer
// value turns the whole hash into a hashtable, about three times the size.
// The sealed card number is the one value of the normal path that is longer:
// "v1:<keyid>:<base64url(nonce|ciphertext|tag)>" is 71 characters for a
// 16-digit card. The ledger stores it as raw bytes instead (Redis strings
// are binary-safe): a marker byte, the 4 bytes of the key id and the 44 or
// so bytes of nonce, ciphertext and tag, 49 bytes for 16 digits, 52 for 19.
// It gives the sealed text back unchanged when it reads the hash, so the
// vault's format is untouched; a value that does not round-trip exactly
// (plain: values of --insecure-plaintext, another version) is stored as is.

// sealedMark starts a packed sealed value; no sealed text starts with it.
const sealedMark = "\x01"

var sealedB64 = base64.RawURLEncoding.Strict()

// packSealed returns the stored form of a sealed card number.
func packSealed(s string) string {
	const head = len("v1:01234567:")
	if len(s) <= head || s[:3] != "v1:" || s[head-1] != ':' {
		return s
	}
	id, err := hex.DecodeString(s[3 : head-1])
	if err != nil {
		return s
	}
	body, err := sealedB64.DecodeString(s[head:])
	if err != nil {
		return s
	}
	p := sealedMark + string(id) + string(body)
	if unpackSealed(p) != s {
		return s
	}
	return p
}

// unpackSealed returns the sealed text of a stored value.
func unpackSealed(v string) string {
	if len(v) < 1+4+1 || v[:1] != sealedMark {
		return v
	}
	return "v1:" + hex.EncodeToString([]byte(v[1:5])) + ":" + sealedB64.EncodeToString([]byte(v[5:]))
}
