package ui

import (
	"strings"
	"testing"
	"time"
)

// The passwords of the logins of NamedLogins.
const (
	AlicePass = alicePass
	BobPass   = bobPass
)

// NamedLogins are the named logins alice and bob (a users file at bcrypt
// cost 10), their hashes made once per test binary.
func NamedLogins(t testing.TB) *Users { return testUsers(t) }

// ShareCSRFKey makes the UIs New builds from cfgs issue and accept the
// same CSRF tokens, as if they were one process: a token fetched from one
// is valid in the others.
func ShareCSRFKey(cfgs ...*Config) {
	k := newCSRFTokens()
	for _, c := range cfgs {
		c.csrf = k
	}
}

// IdentityLogins are alice (whose identity is alice@example.com, her
// single sign-on name) and bob, with the passwords of NamedLogins.
func IdentityLogins(t testing.TB) *Users {
	t.Helper()
	a, b := testHashes(t)
	u, err := ParseUsers("users", strings.NewReader("alice:"+a+":alice@example.com\nbob:"+b+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// SetClock makes the UI built from cfg read the time from now.
func SetClock(cfg *Config, now func() time.Time) { cfg.clock = now }
