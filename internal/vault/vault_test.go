package vault

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const pan = "4111111111111111"

// fixedKey returns a deterministic valid key whose bytes are all b.
func fixedKey(b byte) string {
	raw := make([]byte, KeySize)
	for i := range raw {
		raw[i] = b
	}
	return base64.StdEncoding.EncodeToString(raw)
}

func mustRing(t *testing.T, current string, old ...string) *Keyring {
	t.Helper()
	k, err := NewKeyring(current, old...)
	if err != nil {
		t.Fatalf("NewKeyring: %v", err)
	}
	return k
}

func TestRoundTrip(t *testing.T) {
	k := mustRing(t, fixedKey(1))
	for _, pt := range []string{pan, "", "5500 0000 0000 0004", strings.Repeat("9", 19)} {
		for _, ad := range []string{"", "batch-1/ext-1", "b\x00c"} {
			sealed, err := k.Seal(pt, ad)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			got, err := k.Open(sealed, ad)
			if err != nil {
				t.Fatalf("Open(%q): %v", ad, err)
			}
			if got != pt {
				t.Fatalf("Open = %q, want %q", got, pt)
			}
		}
	}
}

func TestSealedFormat(t *testing.T) {
	k := mustRing(t, fixedKey(2))
	sealed, err := k.Seal(pan, "b1/e1")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(sealed, ":")
	if len(parts) != 3 || parts[0] != "v1" || parts[1] != k.KeyID() {
		t.Fatalf("sealed %q: want v1:%s:<payload>", sealed, k.KeyID())
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("payload not base64url: %v", err)
	}
	if want := 12 + len(pan) + 16; len(raw) != want {
		t.Fatalf("payload %d bytes, want nonce+ct+tag = %d", len(raw), want)
	}
	if strings.Contains(sealed, pan) || strings.Contains(sealed, pan[:6]) && strings.Contains(sealed, pan[12:]) {
		t.Fatalf("sealed value %q shows the card number", sealed)
	}
	// Two seals of the same value differ (random nonce).
	again, _ := k.Seal(pan, "b1/e1")
	if again == sealed {
		t.Fatal("two seals of the same value are identical: nonce reused")
	}
	if id, ok := SealedKeyID(sealed); !ok || id != k.KeyID() {
		t.Fatalf("SealedKeyID = %q, %v", id, ok)
	}
}

func TestKeyIDDerivation(t *testing.T) {
	key := fixedKey(3)
	raw, _ := base64.StdEncoding.DecodeString(key)
	sum := sha256.Sum256(raw)
	want := hex.EncodeToString(sum[:])[:8]
	k := mustRing(t, key)
	if k.KeyID() != want {
		t.Fatalf("KeyID = %q, want %q", k.KeyID(), want)
	}
	if id, err := KeyIDOf(key); err != nil || id != want {
		t.Fatalf("KeyIDOf = %q, %v", id, err)
	}
	if mustRing(t, fixedKey(4)).KeyID() == want {
		t.Fatal("different keys, same id")
	}
}

func TestOpenFailures(t *testing.T) {
	k := mustRing(t, fixedKey(5))
	other := mustRing(t, fixedKey(6))
	sealed, err := k.Seal(pan, "batch-1/ext-1")
	if err != nil {
		t.Fatal(err)
	}
	id, body, _ := splitSealed(sealed)
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	flip := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		return "v1:" + id + ":" + base64.RawURLEncoding.EncodeToString(b)
	}
	otherSealed, _ := other.Seal(pan, "batch-1/ext-1")
	_, otherBody, _ := splitSealed(otherSealed)

	tests := []struct {
		name   string
		ring   *Keyring
		sealed string
		ad     string
		want   error
	}{
		{"wrong additional data", k, sealed, "batch-1/ext-2", ErrDecrypt},
		{"other batch", k, sealed, "batch-2/ext-1", ErrDecrypt},
		{"empty additional data", k, sealed, "", ErrDecrypt},
		{"flipped nonce", k, flip(0), "batch-1/ext-1", ErrDecrypt},
		{"flipped ciphertext", k, flip(12), "batch-1/ext-1", ErrDecrypt},
		{"flipped tag", k, flip(len(raw) - 1), "batch-1/ext-1", ErrDecrypt},
		{"truncated", k, sealed[:len(sealed)-4], "batch-1/ext-1", ErrDecrypt},
		{"too short", k, "v1:" + id + ":AAAA", "batch-1/ext-1", ErrDecrypt},
		{"not base64", k, "v1:" + id + ":***", "batch-1/ext-1", ErrDecrypt},
		{"no header", k, body, "batch-1/ext-1", ErrDecrypt},
		{"version 2", k, "v2" + sealed[2:], "batch-1/ext-1", ErrDecrypt},
		{"bad key id", k, "v1:XYZ:" + body, "batch-1/ext-1", ErrDecrypt},
		{"empty", k, "", "", ErrDecrypt},
		{"unknown key id", k, otherSealed, "batch-1/ext-1", ErrUnknownKey},
		// Payload of another key put under our id: authentication fails.
		{"key id swapped", k, "v1:" + id + ":" + otherBody, "batch-1/ext-1", ErrDecrypt},
		{"plain refused", k, "plain:" + pan, "batch-1/ext-1", ErrPlaintextRefused},
		{"plaintext ring on sealed", Plaintext(), sealed, "batch-1/ext-1", ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.ring.Open(tt.sealed, tt.ad)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open = %q, %v; want error %v", got, err, tt.want)
			}
			if got != "" {
				t.Fatalf("Open returned %q with an error", got)
			}
			if strings.Contains(err.Error(), pan) || strings.Contains(err.Error(), tt.sealed) && tt.sealed != "" {
				t.Fatalf("error %q shows the card number or the sealed value", err)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := fixedKey(7), fixedKey(8)
	before := mustRing(t, oldKey)
	sealedOld, err := before.Seal(pan, "b/e")
	if err != nil {
		t.Fatal(err)
	}

	after := mustRing(t, newKey, oldKey)
	if after.KeyID() == before.KeyID() {
		t.Fatal("rotated ring still seals with the old key")
	}
	got, err := after.Open(sealedOld, "b/e")
	if err != nil || got != pan {
		t.Fatalf("rotated ring opens old value: %q, %v", got, err)
	}
	sealedNew, err := after.Seal(pan, "b/e")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := SealedKeyID(sealedNew); id != after.KeyID() {
		t.Fatalf("new value sealed with %s, want current %s", id, after.KeyID())
	}
	// The old ring cannot read what the new key sealed.
	if _, err := before.Open(sealedNew, "b/e"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old ring on new value: %v, want ErrUnknownKey", err)
	}
	// Once the old key is dropped, its values no longer open.
	if _, err := mustRing(t, newKey).Open(sealedOld, "b/e"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("dropped key: %v, want ErrUnknownKey", err)
	}
	// Old key given twice, or equal to current: accepted.
	if _, err := NewKeyring(newKey, oldKey, oldKey, newKey); err != nil {
		t.Fatalf("duplicate keys: %v", err)
	}
}

func TestBadKeys(t *testing.T) {
	key31 := base64.StdEncoding.EncodeToString(make([]byte, 31))
	key33 := base64.StdEncoding.EncodeToString(make([]byte, 33))
	key16 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	good := fixedKey(9)
	urlOnly := strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xfb\xff", 16))))
	tests := []struct {
		name    string
		current string
		old     []string
	}{
		{"empty", "", nil},
		{"spaces", "   ", nil},
		{"31 bytes", key31, nil},
		{"33 bytes", key33, nil},
		{"16 bytes (AES-128)", key16, nil},
		{"not base64", "not a key at all!", nil},
		{"url alphabet", urlOnly, nil},
		{"hex", strings.Repeat("ab", 32), nil},
		{"raw 32 chars", strings.Repeat("k", 32), nil},
		{"bad old key", good, []string{key31}},
		{"empty old key", good, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := NewKeyring(tt.current, tt.old...)
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("NewKeyring = %v, %v; want ErrBadKey", k, err)
			}
			for _, secret := range append([]string{tt.current}, tt.old...) {
				if strings.TrimSpace(secret) != "" && strings.Contains(err.Error(), secret) {
					t.Fatalf("error %q shows the key", err)
				}
			}
		})
	}
}

func TestLoadKeyring(t *testing.T) {
	dir := t.TempDir()
	cur, old1, old2 := fixedKey(10), fixedKey(11), fixedKey(12)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("key", "\n  "+cur+"\n\n")
	emptyFile := write("empty", " \n")
	badFile := write("bad", "xyz")
	wantID, _ := KeyIDOf(cur)

	tests := []struct {
		name            string
		value, file     string
		oldList         string
		wantErr         error
		wantOpensOldIDs []string
	}{
		{"value", cur, "", "", nil, nil},
		{"value with spaces", " " + cur + "\n", "", "", nil, nil},
		{"file", "", keyFile, "", nil, nil},
		{"old list", cur, "", " " + old1 + " ,," + old2 + ",", nil, []string{old1, old2}},
		{"neither", "", "", old1, ErrNoKey, nil},
		{"both", cur, keyFile, "", ErrBadKey, nil},
		{"missing file", "", filepath.Join(dir, "nope"), "", ErrBadKey, nil},
		{"empty file", "", emptyFile, "", ErrBadKey, nil},
		{"bad file", "", badFile, "", ErrBadKey, nil},
		{"bad old", cur, "", old1 + ",short", ErrBadKey, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := LoadKeyring(tt.value, tt.file, tt.oldList)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("LoadKeyring: %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadKeyring: %v", err)
			}
			if k.KeyID() != wantID {
				t.Fatalf("KeyID = %s, want %s", k.KeyID(), wantID)
			}
			for _, o := range tt.wantOpensOldIDs {
				s, _ := mustRing(t, o).Seal(pan, "ad")
				if got, err := k.Open(s, "ad"); err != nil || got != pan {
					t.Fatalf("old key not usable: %v", err)
				}
			}
		})
	}
}

func TestPlaintextMode(t *testing.T) {
	p := Plaintext()
	if !p.IsPlaintext() || p.KeyID() != PlaintextKeyID {
		t.Fatalf("Plaintext: IsPlaintext=%v KeyID=%q", p.IsPlaintext(), p.KeyID())
	}
	s, err := p.Seal(pan, "b/e")
	if err != nil || s != "plain:"+pan {
		t.Fatalf("Seal = %q, %v", s, err)
	}
	if got, err := p.Open(s, "other"); err != nil || got != pan {
		t.Fatalf("Open = %q, %v", got, err)
	}

	ring := mustRing(t, fixedKey(13))
	if ring.IsPlaintext() {
		t.Fatal("real ring says plaintext")
	}
	if _, err := ring.Open(s, "b/e"); !errors.Is(err, ErrPlaintextRefused) {
		t.Fatalf("real ring opened plain value: %v", err)
	}
	lenient := ring.AllowPlaintext()
	if got, err := lenient.Open(s, "b/e"); err != nil || got != pan {
		t.Fatalf("AllowPlaintext Open = %q, %v", got, err)
	}
	// The lenient copy still seals encrypted, and the original is unchanged.
	sealed, _ := lenient.Seal(pan, "b/e")
	if strings.HasPrefix(sealed, "plain:") || strings.Contains(sealed, pan) {
		t.Fatalf("AllowPlaintext ring sealed %q", sealed)
	}
	if _, err := ring.Open(s, "b/e"); !errors.Is(err, ErrPlaintextRefused) {
		t.Fatal("AllowPlaintext changed the original ring")
	}
}

func TestEphemeral(t *testing.T) {
	a, b := Ephemeral(), Ephemeral()
	if a.KeyID() == b.KeyID() {
		t.Fatal("two ephemeral rings share a key")
	}
	s, err := a.Seal(pan, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Open(s, "x"); err != nil || got != pan {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b.Open(s, "x"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("other ephemeral ring: %v", err)
	}
}

func TestGenerateKey(t *testing.T) {
	seen := map[string]bool{}
	for range 5 {
		key, err := GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(key)
		if err != nil || len(raw) != 32 {
			t.Fatalf("key %d bytes, %v", len(raw), err)
		}
		if seen[key] {
			t.Fatal("GenerateKey repeated a key")
		}
		seen[key] = true
		if _, err := NewKeyring(key); err != nil {
			t.Fatalf("generated key refused: %v", err)
		}
	}
}

func TestNoKeyMaterialInFormatting(t *testing.T) {
	key := fixedKey(14)
	raw, _ := base64.StdEncoding.DecodeString(key)
	k := mustRing(t, key)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, k)
		if strings.Contains(out, key) || strings.Contains(out, string(raw)) || strings.Contains(out, hex.EncodeToString(raw)) {
			t.Fatalf("%s shows key material: %q", verb, out)
		}
		if !strings.Contains(out, k.KeyID()) {
			t.Fatalf("%s = %q, want the key id", verb, out)
		}
	}
}

func TestNilKeyring(t *testing.T) {
	var k *Keyring
	if _, err := k.Seal(pan, ""); !errors.Is(err, ErrBadKey) {
		t.Fatalf("nil Seal: %v", err)
	}
	if _, err := k.Open("plain:1", ""); !errors.Is(err, ErrBadKey) {
		t.Fatalf("nil Open: %v", err)
	}
	if _, err := (&Keyring{}).Seal(pan, ""); !errors.Is(err, ErrBadKey) {
		t.Fatalf("zero Seal: %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	k, err := NewKeyring(fixedKey(15), fixedKey(16))
	if err != nil {
		f.Fatal(err)
	}
	good, _ := k.Seal(pan, "b/e")
	for _, s := range []string{good, "", "v1:", "v1::", "v1:" + k.KeyID() + ":", "plain:", "plain:123", "v1:" + k.KeyID() + ":" + strings.Repeat("A", 40), ":::", "v1:zzzzzzzz:AA"} {
		f.Add(s, "b/e")
	}
	lenient := k.AllowPlaintext()
	f.Fuzz(func(t *testing.T, sealed, ad string) {
		for _, ring := range []*Keyring{k, lenient, Plaintext()} {
			got, err := ring.Open(sealed, ad)
			if err != nil {
				if got != "" {
					t.Fatalf("Open returned %q with error %v", got, err)
				}
				if !errors.Is(err, ErrDecrypt) && !errors.Is(err, ErrUnknownKey) && !errors.Is(err, ErrPlaintextRefused) {
					t.Fatalf("untyped error %v", err)
				}
			}
		}
	})
}

// TestDestinationTag: a tag is keyed (another key, another tag), stable
// for one key, never the destination, and the same from the key's file
// and its value.
func TestDestinationTag(t *testing.T) {
	k1, k2 := Ephemeral(), Ephemeral()
	const card = "card:4111111111111111"
	a, b := k1.DestinationTag(card), k1.DestinationTag(card)
	if a != b || len(a) != 32 {
		t.Fatalf("tags %q %q: want one stable 32-character tag", a, b)
	}
	if k2.DestinationTag(card) == a {
		t.Error("two keys give the same tag")
	}
	if k1.DestinationTag("card:5555555555554444") == a {
		t.Error("two cards give the same tag")
	}
	if strings.Contains(a, "4111") || strings.Contains(a, "1111") {
		t.Errorf("tag %q shows digits of the card", a)
	}
	key, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := NewKeyring(key)
	r2, _ := NewKeyring(key)
	if r1.DestinationTag(card) != r2.DestinationTag(card) {
		t.Error("the same key gives two tags")
	}
	if p1, p2 := Plaintext(), Plaintext(); p1.DestinationTag(card) != p2.DestinationTag(card) {
		t.Error("the plaintext keyring's tag is not stable")
	}
}
