package vault

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// A key's fingerprint proves that two processes hold the same data key
// without either showing it: the first 32 hex characters (128 bits) of
// HMAC-SHA256(key, "payout key fingerprint v1"). The loader records the
// fingerprint of the key it seals with in the ledger; a worker refuses to
// start unless its keyring holds a key of that fingerprint (docs/operations.md,
// "Card numbers and keys"). Unlike the 8-character key id, which only
// names a key inside sealed values, a fingerprint is long enough that a
// different key never matches by chance, and it cannot be computed
// without the key.

// fingerprintLabel is the HMAC message of a key's fingerprint.
const fingerprintLabel = "payout key fingerprint v1"

// fingerprintLen is the length of a fingerprint in hex characters.
const fingerprintLen = 32

// PlaintextFingerprint is the fingerprint of the Plaintext keyring: card
// numbers are stored unencrypted (--insecure-plaintext).
const PlaintextFingerprint = "plain"

func fingerprint(raw []byte) string {
	m := hmac.New(sha256.New, raw)
	m.Write([]byte(fingerprintLabel))
	return hex.EncodeToString(m.Sum(nil))[:fingerprintLen]
}

// Fingerprint returns the fingerprint of the current key, the one Seal
// uses (PlaintextFingerprint for the Plaintext keyring).
func (k *Keyring) Fingerprint() string {
	switch {
	case k == nil:
		return ""
	case k.plaintext:
		return PlaintextFingerprint
	}
	return k.prints[k.current]
}

// Opens reports whether k can open values sealed by a keyring whose
// Fingerprint is fp: it holds a key of that fingerprint, current or old,
// or fp is PlaintextFingerprint and k reads plain: values.
func (k *Keyring) Opens(fp string) bool {
	if k == nil || fp == "" {
		return false
	}
	if fp == PlaintextFingerprint {
		return k.plaintext || k.allowPlain
	}
	for _, p := range k.prints {
		if hmac.Equal([]byte(p), []byte(fp)) {
			return true
		}
	}
	return false
}

// KeyIDs returns, sorted, the ids of every key k opens values with, and
// PlaintextKeyID when it opens plain: values: what a sealed value must
// name (SealedKeyID) for k to have a chance to open it.
func (k *Keyring) KeyIDs() []string {
	if k == nil {
		return nil
	}
	var ids []string
	for id := range k.keys {
		ids = append(ids, id)
	}
	if k.plaintext || k.allowPlain {
		ids = append(ids, PlaintextKeyID)
	}
	slices.Sort(ids)
	return ids
}
