package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// The actor recorded for a request signed in with the bearer token, and
// for the credential-less local mode.
const (
	tokenUser = "ui-token"
	localUser = "ui-local"
)

type userKey struct{}

// userFrom is the signed-in user of the request: the basic-auth user name,
// tokenUser or localUser. Operator actions record it as who acted.
func userFrom(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

func withUser(next http.Handler, user string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// csrfField is the hidden form field that carries the CSRF token.
const csrfField = "csrf"

// csrfTokens issues and checks the CSRF tokens of the UI's forms: the
// HMAC-SHA256 of the signed-in user under a key drawn at start, so a token
// is good for one user of one UI process and cannot be made without the
// key. It comes on top of http.CrossOriginProtection (Sec-Fetch-Site and
// Origin), which refuses cross-site requests first.
type csrfTokens struct{ key []byte }

func newCSRFTokens() *csrfTokens {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return &csrfTokens{key: k}
}

func (c *csrfTokens) token(user string) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("payout-ui-csrf\x00" + user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether got is the token of user (constant time).
func (c *csrfTokens) valid(user, got string) bool {
	return user != "" && got != "" && hmac.Equal([]byte(got), []byte(c.token(user)))
}

// choicesMAC binds an upload's file choices to its staging id and the
// signed-in user: the confirm form carries them back, and a client cannot
// load with other choices than the preview it was shown.
func (c *csrfTokens) choicesMAC(user, hash string, f FileChoices) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("payout-ui-upload\x00" + user + "\x00" + hash + "\x00" + f.AmountFormat + "\x00" + f.Sheet))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
