package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
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

func withUser(next http.Handler, user string, roles roleMap) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		roles.serve(next, w, r, user, nil)
	})
}

// csrfField is the hidden form field that carries the CSRF token.
const csrfField = "csrf"

// csrfTTL is how long a form's CSRF token is good: a page left open
// longer is reloaded before its form is sent.
const csrfTTL = 8 * time.Hour

// csrfTokens issues and checks the CSRF tokens of the UI's forms: the time
// of issue and the HMAC-SHA256, under a key drawn at start, of the
// signed-in user, the session (sessionOf: the credentials the request
// came with) and that time. A token is good for one user's session of one
// UI process for csrfTTL, and cannot be made without the key. It comes on
// top of http.CrossOriginProtection (Sec-Fetch-Site and Origin), which
// refuses cross-site requests first.
type csrfTokens struct {
	key []byte
	now func() time.Time // nil: time.Now
}

func newCSRFTokens() *csrfTokens {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return &csrfTokens{key: k}
}

// withClock is c with the clock now (the UI's, so tests can move it).
func (c *csrfTokens) withClock(now func() time.Time) *csrfTokens {
	return &csrfTokens{key: c.key, now: now}
}

func (c *csrfTokens) clock() time.Time {
	if c.now == nil {
		return time.Now()
	}
	return c.now()
}

// sessionOf names the sign-in a request belongs to: its Authorization
// header (a basic-auth login with its password, or the bearer token), else
// the cookies of oauth2-proxy's session (single sign-on), else nothing but
// the user. Only a digest of it goes into a token.
func sessionOf(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		return "auth\x00" + a
	}
	var b strings.Builder
	for _, ck := range r.Cookies() {
		if strings.HasPrefix(ck.Name, "_oauth2_proxy") {
			b.WriteString(ck.Name + "=" + ck.Value + "\x00")
		}
	}
	return "sso\x00" + b.String()
}

// token is the CSRF token of the request's user and session, issued now.
func (c *csrfTokens) token(r *http.Request) string {
	issued := c.clock().Unix()
	return strconv.FormatInt(issued, 10) + "." + c.mac(userFrom(r.Context()), sessionOf(r), issued)
}

func (c *csrfTokens) mac(user, session string, issued int64) string {
	m := hmac.New(sha256.New, c.key)
	sum := sha256.Sum256([]byte(session))
	m.Write([]byte("payout-ui-csrf\x00" + strconv.FormatInt(issued, 10) + "\x00"))
	m.Write(sum[:])
	m.Write([]byte(user))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether got is a token of the request's user and session
// issued less than csrfTTL ago (compared in constant time).
func (c *csrfTokens) valid(r *http.Request, got string) bool {
	user := userFrom(r.Context())
	ts, mac, ok := strings.Cut(got, ".")
	if user == "" || !ok {
		return false
	}
	issued, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	age := c.clock().Sub(time.Unix(issued, 0))
	if age < -time.Minute || age > csrfTTL {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(c.mac(user, sessionOf(r), issued)))
}

// choicesMAC binds an upload's file choices to its staging id and the
// signed-in user: the confirm form carries them back, and a client cannot
// load with other choices than the preview it was shown.
func (c *csrfTokens) choicesMAC(user, hash string, f FileChoices) string {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("payout-ui-upload\x00" + user + "\x00" + hash + "\x00" + f.AmountFormat + "\x00" + f.Sheet))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
