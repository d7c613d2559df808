package ui

import "testing"

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
