package cli

import (
	"strings"
	"testing"

	"github.com/acme/payout/internal/ledger"
)

func TestTerm(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"paid by hand", "paid by hand"},
		{"ok\rbob approved", `ok\rbob approved`},
		{"a\nb\tc", `a\nb\tc`},
		{"\x1b[2Kbob", `\x1b[2Kbob`},
		{"ali\u200bce", `ali\u200bce`},
		{"evil\u202egpj.csv", `evil\u202egpj.csv`},
		{"x\u0085y\x7f", `x\u0085y\x7f`},
		{"card 4111 1111 1111 1111", "card 411111******1111"},
		{"café", "café"},
	} {
		if got := term(tc.in); got != tc.want {
			t.Errorf("term(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestAuditLineEscapes: an audit entry written before notes were checked
// (or by hand) with a carriage return, a line break or an escape sequence
// in its actor or note prints as one line, its controls escaped: it
// cannot overwrite the line with a forged "bob approved".
func TestAuditLineEscapes(t *testing.T) {
	line := auditLine(ledger.AuditEntry{Actor: "mallory\r", ExternalID: "PO-1", From: "needs_review", To: "rejected",
		Context: map[string]string{"note": "checked\r2026-12-02T03:59:47.000Z  bob  approved\n\x1b[1A"}})
	if strings.ContainsAny(line, "\r\n\x1b") {
		t.Errorf("auditLine printed a control character: %q", line)
	}
	if !strings.Contains(line, `note=checked\r2026`) || !strings.Contains(line, `mallory\r`) {
		t.Errorf("auditLine = %q, want the controls shown escaped", line)
	}
}
