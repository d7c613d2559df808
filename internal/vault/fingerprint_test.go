package vault

import (
	"slices"
	"strings"
	"testing"
)

// TestFingerprint: a key's fingerprint is stable, long, never the key or
// its id, and a keyring opens exactly the fingerprints of its keys.
func TestFingerprint(t *testing.T) {
	a, b, c := fixedKey(1), fixedKey(2), fixedKey(3)
	ringA, _ := NewKeyring(a)
	ringBA, _ := NewKeyring(b, a) // rotated: b current, a old
	ringC, _ := NewKeyring(c)
	fa := ringA.Fingerprint()
	if len(fa) != fingerprintLen || strings.Contains(a, fa) || strings.HasPrefix(fa, ringA.KeyID()) {
		t.Fatalf("fingerprint %q", fa)
	}
	if again, _ := NewKeyring(a); again.Fingerprint() != fa {
		t.Fatal("fingerprint not stable")
	}
	for _, tc := range []struct {
		name string
		ring *Keyring
		fp   string
		want bool
	}{
		{"own key", ringA, fa, true},
		{"old key", ringBA, fa, true},
		{"current after rotation", ringBA, ringBA.Fingerprint(), true},
		{"other key", ringC, fa, false},
		{"newer key not held", ringA, ringBA.Fingerprint(), false},
		{"plain, real ring", ringA, PlaintextFingerprint, false},
		{"plain, real ring allowing plain", ringA.AllowPlaintext(), PlaintextFingerprint, true},
		{"plain, plaintext ring", Plaintext(), PlaintextFingerprint, true},
		{"real key, plaintext ring", Plaintext(), fa, false},
		{"empty", ringA, "", false},
	} {
		if got := tc.ring.Opens(tc.fp); got != tc.want {
			t.Errorf("%s: Opens = %v, want %v", tc.name, got, tc.want)
		}
	}
	idA, _ := KeyIDOf(a)
	idB, _ := KeyIDOf(b)
	want := []string{idA, idB}
	slices.Sort(want)
	if got := ringBA.KeyIDs(); !slices.Equal(got, want) {
		t.Errorf("KeyIDs %v, want %v", got, want)
	}
	if got := Plaintext().KeyIDs(); !slices.Equal(got, []string{PlaintextKeyID}) {
		t.Errorf("plaintext KeyIDs %v", got)
	}
}
