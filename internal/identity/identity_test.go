package identity

import (
	"errors"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "alice", want: "alice"},
		{in: "  Alice ", want: "alice"},
		{in: "Alice@Example.com", want: "alice@example.com"},
		{in: "ａｌｉｃｅ", want: "alice"}, // full-width letters
		{in: "Mary Ann", want: "mary ann"},
		{in: "alice\u200b", bad: true},      // zero-width space
		{in: "al\u200dice", bad: true},      // zero-width joiner
		{in: "\u202ealice", bad: true},      // right-to-left override
		{in: "alice\u00a0smith", bad: true}, // no-break space
		{in: "alice\u2028", bad: true},      // line separator
		{in: "ali\u0007ce", bad: true},      // bell
		{in: "alice\ufeff", bad: true},      // byte order mark
		{in: "alice\ufe0f", bad: true},      // variation selector
		{in: "", bad: true},
		{in: "   ", bad: true},
		{in: "system:spool(uid 0 root)", bad: true},
		{in: "SYSTEM:x", bad: true},
		{in: string([]byte{0xff, 'a'}), bad: true},
	}
	for _, tt := range tests {
		got, err := Canonical(tt.in)
		if tt.bad {
			if err == nil || !errors.Is(err, ErrBadName) {
				t.Errorf("Canonical(%+q) = %q, %v: want ErrBadName", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Canonical(%+q) = %q, %v: want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestSame(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"alice", "alice", true},
		{"alice", " ALICE ", true},
		{"alice", "alice\u200b", true}, // an old record with an invisible character is still alice
		{"alice", "ａｌｉｃｅ", true},
		{"alice", "bob", false},
		{"alice", "alice@example.com", false}, // the users file maps one to the other, not Same
		{"", "", false},
		{"\u200b", "", false},
		{System("spool", "uid 1001 erp-drop"), System("spool", "uid 1001 erp-drop"), false},
		{System("spool", "uid 1000 alice"), "alice", false},
	}
	for _, tt := range tests {
		if got := Same(tt.a, tt.b); got != tt.want {
			t.Errorf("Same(%+q, %+q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestSystem(t *testing.T) {
	got := System("spool", "uid 1001 erp\u200b-drop)")
	if got != "system:spool(uid 1001 erp-drop)" || !IsSystem(got) || IsPerson(got) {
		t.Fatalf("System = %q (system %v, person %v)", got, IsSystem(got), IsPerson(got))
	}
}
