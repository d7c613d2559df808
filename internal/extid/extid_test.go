package extid

import (
	"testing"
)

func TestKey(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"PO-1", "PO-1", true},
		{"PO-Case-3", "po-case-3", true},
		{"PO-CASE-3", "po-case-3", true},
		{"PO-caf\u00e9-2", "PO-cafe\u0301-2", true},                    // NFC and NFD
		{"PO-CAF\u00c9-2", "po-cafe\u0301-2", true},                    // and case
		{"PO-Stra\u00dfe", "po-strasse", true},                         // full case folding: ß is ss
		{"\u0399\u03a3\u039f\u03a3", "\u03b9\u03c3\u03bf\u03c2", true}, // Greek final sigma folds to σ
		{"PO-1", "PO-2", false},
		{"PO-1", "PO-1 ", false},
		{"PO-cafe-2", "PO-caf\u00e9-2", false}, // an accent is not case
		{"PO-\uff11", "PO-1", false},           // compatibility forms stay apart (NFC, not NFKC)
	}
	for _, tt := range tests {
		if got := Key(tt.a) == Key(tt.b); got != tt.same {
			t.Errorf("Key(%q) == Key(%q) is %v, want %v (keys %q, %q)", tt.a, tt.b, got, tt.same, Key(tt.a), Key(tt.b))
		}
		if k := Key(tt.a); Key(k) != k {
			t.Errorf("Key(%q) = %q is not its own key (%q)", tt.a, k, Key(k))
		}
	}
}

func TestKeyASCIIDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = Key("po-12345") }); n != 0 {
		t.Errorf("Key of a lower-case ASCII id allocates %v times", n)
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{"PO-1", "PO-caf\u00e9", "PO-cafe\u0301", "\u1e9e", "\u0130", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k := Key(s)
		if Key(k) != k {
			t.Errorf("Key(%q) = %q, whose key is %q", s, k, Key(k))
		}
	})
}
