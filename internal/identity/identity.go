// Package identity says who acted, once, for every place that records an
// actor or compares two of them (four-eyes).
//
// An identity is either a person or a system. A person's name is
// canonical: Canonical refuses a name that holds control characters,
// format characters (Unicode Cf: zero-width spaces and joiners, bidi
// marks and overrides, the byte order mark), line or paragraph separators,
// or any space but U+0020 inside it, so "alice" followed by a zero-width
// space cannot be recorded beside "alice"; it folds the name to NFKC and
// lower case, so "Alice" and a full-width "ａｌｉｃｅ" are "alice". The
// mapping of several names to one person (a basic-auth login and a
// single sign-on e-mail address) is the users file's (internal/ui): it
// hands Canonical the person's one identity.
//
// A system identity names something that is not a person, such as the
// account that delivered a file to the spool: "system:spool(uid 1001
// erp-drop)" (System). It never counts as a person for four-eyes: it cannot
// approve, and an approver is never the same person as it.
//
// Same is the one comparison: every four-eyes check (the ledger's
// Controls.Approve, the console's offer of Approve) goes through it.
package identity

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxLen bounds a name in bytes (the audit trail and the UI show it).
const MaxLen = 128

// SystemPrefix starts every system identity.
const SystemPrefix = "system:"

// ErrBadName is matched (errors.Is) by every NameError.
var ErrBadName = errors.New("identity: bad name")

// NameError says why a name is not a person's canonical name.
type NameError struct {
	Name   string // as given, quoted with %q in Error
	Reason string
}

func (e *NameError) Error() string { return fmt.Sprintf("name %+q %s", e.Name, e.Reason) }

// Unwrap lets errors.Is match ErrBadName.
func (e *NameError) Unwrap() error { return ErrBadName }

// Canonical is the canonical form of a person's name: surrounding spaces
// (U+0020) trimmed, NFKC, lower case. It refuses an empty or too long name, a
// name that is not UTF-8, a name with an invisible or format character
// (Unicode categories Cc, Cf, Co, Cs, Zl, Zp and every Zs but U+0020),
// and a name starting with SystemPrefix (a person cannot pass as a
// system).
func Canonical(name string) (string, error) {
	t := strings.Trim(name, " ")
	bad := func(reason string) (string, error) { return "", &NameError{Name: name, Reason: reason} }
	switch {
	case t == "":
		return bad("is empty: a person's name is needed")
	case !utf8.ValidString(t):
		return bad("is not UTF-8 text")
	}
	if r, ok := invisible(t); ok {
		return bad(fmt.Sprintf("holds the invisible or format character %U: it would show as another name", r))
	}
	c := strings.ToLower(norm.NFKC.String(t))
	if r, ok := invisible(c); ok {
		return bad(fmt.Sprintf("holds the invisible or format character %U once normalised", r))
	}
	switch {
	case len(c) > MaxLen:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxLen))
	case strings.HasPrefix(c, SystemPrefix):
		return bad("starts with " + SystemPrefix + ", which names systems, not people")
	}
	return c, nil
}

// invisible returns the first character of s that a person would not see
// as itself: controls, format characters, private use, surrogates, line
// and paragraph separators, and spaces other than U+0020.
func invisible(s string) (rune, bool) {
	for _, r := range s {
		if r == ' ' {
			continue
		}
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Zs) ||
			r == utf8.RuneError || unicode.Is(unicode.Variation_Selector, r) {
			return r, true
		}
	}
	return 0, false
}

// System is the identity of a system: "system:KIND(DETAIL)". KIND and
// DETAIL lose any character Canonical would refuse, and the parentheses.
func System(kind, detail string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if _, bad := invisible(string(r)); bad || r == '(' || r == ')' {
				return -1
			}
			return r
		}, s)
	}
	return SystemPrefix + clean(kind) + "(" + clean(detail) + ")"
}

// IsSystem reports whether id is a system identity.
func IsSystem(id string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(id)), SystemPrefix)
}

// IsPerson reports whether id is a person's name Canonical accepts.
func IsPerson(id string) bool {
	_, err := Canonical(id)
	return err == nil
}

// Same reports whether a and b name the same person, as four-eyes asks:
// both are compared by their skeleton (NFKC, lower case, every invisible
// or format character dropped), so a name recorded before names were
// checked, "alice" with a zero-width space, is still alice. A system
// identity is never the same person as anything, nor is an empty name.
func Same(a, b string) bool {
	if IsSystem(a) || IsSystem(b) {
		return false
	}
	sa, sb := skeleton(a), skeleton(b)
	return sa != "" && sa == sb
}

// Key is the form Same compares a person's name in (its skeleton), for a
// comparison made where Go is not, such as a ledger script: two names are
// the same person when both keys are equal and not empty. A system
// identity has the empty key: it is nobody's same person.
func Key(name string) string {
	if IsSystem(name) {
		return ""
	}
	return skeleton(name)
}

// skeleton is name as Same compares it.
func skeleton(name string) string {
	s := strings.Map(func(r rune) rune {
		if _, bad := invisible(string(r)); bad {
			return -1
		}
		return r
	}, norm.NFKC.String(name))
	return strings.ToLower(strings.TrimSpace(s))
}
