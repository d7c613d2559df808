// Package vault encrypts card numbers (PANs) before they are stored, so that
// the Redis ledger never holds a PAN in clear (PCI DSS: unreadable wherever
// stored).
//
// # Keys
//
// A data key is 32 random bytes (AES-256), written as standard base64
// (`payout keygen` prints one; GenerateKey makes it). A key's id is the first
// 8 hex characters of SHA-256 over the 32 raw key bytes, so the same key
// always has the same id and an operator can compute it with
//
//	printf %s "$KEY" | base64 -d | sha256sum | cut -c1-8
//
// The id is not secret. It is written in front of every ciphertext so that a
// keyring holding several keys knows which one to use: the current key seals,
// every key in the ring opens. To rotate, make a new key current and move the
// old one to PAYOUT_DATA_KEYS_OLD; values sealed with the old key stay
// readable until they are re-sealed or expire.
//
// # Sealed format
//
//	v1:<keyid>:<base64url-no-padding(nonce[12] | ciphertext | tag[16])>
//
// AES-256-GCM with a random 96-bit nonce per value. The authenticated data is
// the header "v1:<keyid>:" followed by the caller's additional data (the
// ledger passes batch and externalId), so a sealed value copied to another
// payout, or given another key id, does not open. Random nonces keep a key
// safe for about 2^32 seals; rotate well before that.
//
// # Plaintext mode
//
// Plaintext returns a keyring for --insecure-plaintext (local trials only):
// Seal returns "plain:<value>" and Open reads it back. A real keyring refuses
// to open "plain:" values (ErrPlaintextRefused): accepting them would let
// anyone who can write to Redis replace an encrypted card number by a card
// number of their choice, because "plain:" values carry no authentication.
// AllowPlaintext returns a copy that accepts them anyway; use it only to read
// data written by an insecure run, never as a standing configuration.
//
// No error from this package contains key material, a plaintext or a sealed
// value.
package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Errors, to be tested with errors.Is.
var (
	// ErrBadKey: a key is not standard base64 of exactly 32 bytes, two
	// different keys share an id, or a key file cannot be used.
	ErrBadKey = errors.New("vault: bad data key")
	// ErrNoKey: neither a data key nor a key file was given.
	ErrNoKey = errors.New("vault: no data key configured")
	// ErrUnknownKey: the sealed value names a key id the keyring does not hold.
	ErrUnknownKey = errors.New("vault: unknown key id")
	// ErrDecrypt: the sealed value is malformed, was tampered with, or was
	// sealed for other additional data.
	ErrDecrypt = errors.New("vault: cannot decrypt")
	// ErrPlaintextRefused: a real keyring was asked to open a "plain:" value.
	ErrPlaintextRefused = errors.New("vault: plaintext value refused")
)

const (
	// KeySize is the size of a raw data key in bytes (AES-256).
	KeySize = 32
	// PlaintextPrefix starts every value sealed by the Plaintext keyring.
	PlaintextPrefix = "plain:"
	// PlaintextKeyID is what KeyID returns for the Plaintext keyring.
	PlaintextKeyID = "plain"

	version   = "v1"
	idLen     = 8
	nonceSize = 12
)

var b64 = base64.RawURLEncoding

// Keyring seals with its current key and opens with any of its keys. It is
// safe for concurrent use. The zero value and nil are not usable: build one
// with NewKeyring, LoadKeyring, Ephemeral or Plaintext.
type Keyring struct {
	current    string                 // key id; "" for the plaintext keyring
	keys       map[string]cipher.AEAD // by key id
	prints     map[string]string      // key fingerprint (fingerprint.go) by key id
	tags       map[string][]byte      // destination tag key (tag.go) by key id
	plaintext  bool                   // Seal writes plain:, Open reads it
	allowPlain bool                   // a real keyring that also reads plain:
}

// NewKeyring builds a keyring whose current key (standard base64, 32 bytes)
// seals and opens, and whose old keys only open. An old key equal to the
// current one is ignored; two different keys with the same id are refused.
func NewKeyring(current string, old ...string) (*Keyring, error) {
	raw, err := decodeKey(current)
	if err != nil {
		return nil, fmt.Errorf("current key: %w", err)
	}
	k := &Keyring{keys: map[string]cipher.AEAD{}, prints: map[string]string{}}
	id, err := k.add(raw)
	if err != nil {
		return nil, fmt.Errorf("current key: %w", err)
	}
	k.current = id
	for i, s := range old {
		raw, err := decodeKey(s)
		if err != nil {
			return nil, fmt.Errorf("old key #%d: %w", i+1, err)
		}
		if _, err := k.add(raw); err != nil {
			return nil, fmt.Errorf("old key #%d: %w", i+1, err)
		}
	}
	return k, nil
}

// LoadKeyring builds the CLI's keyring: the current key comes from current
// (PAYOUT_DATA_KEY) or from the file currentFile (--data-key-file; its
// content is trimmed of surrounding white space), exactly one of the two;
// oldList (PAYOUT_DATA_KEYS_OLD) is a comma-separated list of old keys, empty
// entries ignored. Neither current nor currentFile gives ErrNoKey.
func LoadKeyring(current, currentFile string, oldList string) (*Keyring, error) {
	current = strings.TrimSpace(current)
	switch {
	case current != "" && currentFile != "":
		return nil, fmt.Errorf("%w: give the data key either as a value or as a file, not both", ErrBadKey)
	case current == "" && currentFile == "":
		return nil, ErrNoKey
	case currentFile != "":
		b, err := os.ReadFile(currentFile)
		if err != nil {
			return nil, fmt.Errorf("%w: read key file: %w", ErrBadKey, err)
		}
		current = strings.TrimSpace(string(b))
		if current == "" {
			return nil, fmt.Errorf("%w: key file %s is empty", ErrBadKey, currentFile)
		}
	}
	var old []string
	for _, s := range strings.Split(oldList, ",") {
		if s = strings.TrimSpace(s); s != "" {
			old = append(old, s)
		}
	}
	return NewKeyring(current, old...)
}

// Ephemeral returns a keyring with one fresh random key held only in memory,
// for one-shot runs whose Redis dies with the process.
func Ephemeral() *Keyring {
	raw := make([]byte, KeySize)
	_, _ = rand.Read(raw) // never fails (crypto/rand crashes the program instead)
	k := &Keyring{keys: map[string]cipher.AEAD{}, prints: map[string]string{}}
	id, err := k.add(raw)
	if err != nil { // unreachable: a fresh ring has no ids to clash with
		panic(err)
	}
	k.current = id
	return k
}

// Plaintext returns the keyring of --insecure-plaintext: Seal returns
// "plain:<value>", Open reads such values and refuses sealed ones
// (ErrUnknownKey). It protects nothing.
func Plaintext() *Keyring {
	return &Keyring{plaintext: true}
}

// AllowPlaintext returns a copy of k that also opens "plain:" values. See the
// package documentation for why this is unsafe as a standing setting.
func (k *Keyring) AllowPlaintext() *Keyring {
	if k == nil {
		return nil
	}
	c := *k
	c.allowPlain = true
	return &c
}

// GenerateKey returns a new random data key as standard base64.
func GenerateKey() (string, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("vault: generate key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// KeyIDOf returns the id of a base64 data key, as written in sealed values.
func KeyIDOf(key string) (string, error) {
	raw, err := decodeKey(key)
	if err != nil {
		return "", err
	}
	return keyID(raw), nil
}

// SealedKeyID returns the key id a sealed value names ("plain" for a plain:
// value), and false when the value is not in a known format. It lets a
// rotation job find values still sealed with an old key.
func SealedKeyID(sealed string) (string, bool) {
	if strings.HasPrefix(sealed, PlaintextPrefix) {
		return PlaintextKeyID, true
	}
	id, _, err := splitSealed(sealed)
	if err != nil {
		return "", false
	}
	return id, true
}

// KeyID returns the id of the current key ("plain" for the Plaintext keyring).
func (k *Keyring) KeyID() string {
	if k == nil {
		return ""
	}
	if k.plaintext {
		return PlaintextKeyID
	}
	return k.current
}

// IsPlaintext reports whether k is the insecure Plaintext keyring.
func (k *Keyring) IsPlaintext() bool { return k != nil && k.plaintext }

// String describes the keyring without key material.
func (k *Keyring) String() string {
	switch {
	case k == nil:
		return "vault.Keyring(nil)"
	case k.plaintext:
		return "vault.Keyring(plaintext)"
	default:
		return fmt.Sprintf("vault.Keyring(current=%s, keys=%d)", k.current, len(k.keys))
	}
}

// GoString keeps %#v from printing key material.
func (k *Keyring) GoString() string { return k.String() }

// Seal encrypts plaintext with the current key, bound to additionalData.
func (k *Keyring) Seal(plaintext string, additionalData string) (string, error) {
	if k == nil || (!k.plaintext && k.keys[k.current] == nil) {
		return "", fmt.Errorf("%w: keyring not initialised", ErrBadKey)
	}
	if k.plaintext {
		return PlaintextPrefix + plaintext, nil
	}
	aead := k.keys[k.current]
	header := version + ":" + k.current + ":"
	nonce := make([]byte, nonceSize, nonceSize+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("vault: nonce: %w", err)
	}
	out := aead.Seal(nonce, nonce, []byte(plaintext), []byte(header+additionalData))
	return header + b64.EncodeToString(out), nil
}

// Open decrypts a value made by Seal with the same additionalData.
func (k *Keyring) Open(sealed, additionalData string) (string, error) {
	if k == nil {
		return "", fmt.Errorf("%w: keyring not initialised", ErrBadKey)
	}
	if rest, ok := strings.CutPrefix(sealed, PlaintextPrefix); ok {
		if !k.plaintext && !k.allowPlain {
			return "", fmt.Errorf("%w: value is stored unencrypted (plain:); this keyring opens only encrypted values", ErrPlaintextRefused)
		}
		return rest, nil
	}
	id, body, err := splitSealed(sealed)
	if err != nil {
		return "", err
	}
	aead := k.keys[id]
	if aead == nil {
		return "", fmt.Errorf("%w: value sealed with key %s, which this keyring does not hold", ErrUnknownKey, id)
	}
	raw, err := b64.DecodeString(body)
	if err != nil {
		return "", fmt.Errorf("%w: malformed sealed value (payload is not base64)", ErrDecrypt)
	}
	if len(raw) < nonceSize+aead.Overhead() {
		return "", fmt.Errorf("%w: malformed sealed value (too short)", ErrDecrypt)
	}
	header := version + ":" + id + ":"
	pt, err := aead.Open(nil, raw[:nonceSize], raw[nonceSize:], []byte(header+additionalData))
	if err != nil {
		return "", fmt.Errorf("%w: authentication failed (tampered, or sealed for another payout)", ErrDecrypt)
	}
	return string(pt), nil
}

// splitSealed checks the "v1:<keyid>:" header and returns id and payload.
func splitSealed(sealed string) (id, body string, err error) {
	v, rest, ok := strings.Cut(sealed, ":")
	if !ok || v != version {
		return "", "", fmt.Errorf("%w: malformed sealed value (no %s: header)", ErrDecrypt, version)
	}
	id, body, ok = strings.Cut(rest, ":")
	if !ok || !validID(id) {
		return "", "", fmt.Errorf("%w: malformed sealed value (bad key id)", ErrDecrypt)
	}
	return id, body, nil
}

func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// add installs a raw key and returns its id.
func (k *Keyring) add(raw []byte) (string, error) {
	id := keyID(raw)
	block, err := aes.NewCipher(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	if prev, ok := k.keys[id]; ok {
		// Same id: the same key given twice is harmless; a different key with
		// the same id (2^-32 chance) would make values ambiguous.
		if !sameKey(prev, aead) {
			return "", fmt.Errorf("%w: two different keys share id %s", ErrBadKey, id)
		}
		return id, nil
	}
	k.keys[id] = aead
	k.prints[id] = fingerprint(raw)
	if k.tags == nil {
		k.tags = map[string][]byte{}
	}
	k.tags[id] = tagKey(raw)
	return id, nil
}

// sameKey tells whether two AEADs hold the same key by sealing a fixed
// probe with a fixed nonce under both.
func sameKey(a, b cipher.AEAD) bool {
	nonce := make([]byte, nonceSize)
	probe := []byte("vault key probe")
	return string(a.Seal(nil, nonce, probe, nil)) == string(b.Seal(nil, nonce, probe, nil))
}

func keyID(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:idLen]
}

// decodeKey decodes a standard-base64 key of exactly KeySize bytes. Errors
// say what is wrong in general terms only, never echoing the input.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadKey)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not standard base64", ErrBadKey)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("%w: decodes to %d bytes, want %d", ErrBadKey, len(raw), KeySize)
	}
	return raw, nil
}
