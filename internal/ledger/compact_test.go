package ledger

import (
	"strings"
	"testing"

	"github.com/acme/payout/internal/vault"
)

func TestPackSealed(t *testing.T) {
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ring, err := vault.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, pan := range []string{"4111111111111111", "4111111111111111234"} {
		s, err := ring.Seal(pan, "b:x")
		if err != nil {
			t.Fatal(err)
		}
		p := packSealed(s)
		if len(p) > 64 {
			t.Errorf("packed %d-digit card is %d bytes, want <= 64 (hash-max-listpack-value)", len(pan), len(p))
		}
		if got := unpackSealed(p); got != s {
			t.Errorf("unpack(pack(%q)) = %q", s, got)
		}
		if got, err := ring.Open(unpackSealed(p), "b:x"); err != nil || got != pan {
			t.Errorf("open after round trip: %q, %v", got, err)
		}
	}
	for _, s := range []string{"", "plain:4111111111111111", "v1:0123456z:AAAA", "v1:01234567:AA=A", "v2:01234567:AAAA", "v1:ABCDEF01:AAAA"} {
		if got := packSealed(s); got != s {
			t.Errorf("packSealed(%q) = %q, want it unchanged", s, got)
		}
		if got := unpackSealed(s); got != s {
			t.Errorf("unpackSealed(%q) = %q, want it unchanged", s, got)
		}
	}
	if strings.HasPrefix("v1:", sealedMark) || strings.HasPrefix("plain:", sealedMark) {
		t.Fatal("sealedMark collides with a sealed text")
	}
}
