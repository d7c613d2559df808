package ui

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/card"
)

type nonceKey struct{}

// nonceFrom returns the CSP nonce of the request (set by securityHeaders).
func nonceFrom(ctx context.Context) string {
	n, _ := ctx.Value(nonceKey{}).(string)
	return n
}

func newNonce() string {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("ui: crypto/rand failed: " + err.Error()) // never happens on supported systems
	}
	// base64url: no '+' or '/', which html/template would escape in the
	// nonce attribute and so break the match with the header.
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// contentSecurityPolicy is the policy of every response. Scripts: our own
// files plus inline scripts carrying the per-request nonce (asynqmon's index
// has two small inline scripts, which we tag). Styles: our own files plus
// nonce-tagged style elements; Material-UI (JSS) reads the nonce from a
// <meta property="csp-nonce"> that we insert into asynqmon's index and sets
// it on every style element it creates. Nothing is loaded from other hosts.
func contentSecurityPolicy(nonce string) string {
	n := "'nonce-" + nonce + "'"
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' " + n,
		"style-src 'self' " + n,
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src 'self'",
		"manifest-src 'self'",
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
	}, "; ")
}

// securityHeaders sets the security headers on every response and puts a
// fresh CSP nonce into the request context.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nonce := newNonce()
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy(nonce))
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
		// Everything but asynqmon's content-hashed assets is private and
		// live: no copy in any cache.
		if !strings.HasPrefix(r.URL.Path, monitoringPath+"/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), nonceKey{}, nonce)))
	})
}

// rewriteMonitoring adapts asynqmon's responses to our policy: its HTML
// index gets the nonce (inline scripts, csp-nonce meta for JSS) and loses the
// stylesheets it would fetch from other hosts; its API JSON gets card-like
// numbers in task error messages masked (payloads and results are masked by
// the formatters). Everything else passes through untouched.
func rewriteMonitoring(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, monitoringPath+"/static/") {
			next.ServeHTTP(w, r)
			return
		}
		api := strings.HasPrefix(r.URL.Path, monitoringPath+"/api/")
		bw := &bufferingWriter{ResponseWriter: w, code: http.StatusOK}
		if api {
			bw.want = func(ct string) bool { return true }
		} else {
			bw.want = func(ct string) bool { return strings.HasPrefix(ct, "text/html") }
		}
		next.ServeHTTP(bw, r)
		if !bw.buffering {
			bw.flushHeader()
			return
		}
		body := bw.buf.Bytes()
		if api {
			body = scrubErrorMessages(body)
		} else {
			body = rewriteIndex(body, nonceFrom(r.Context()))
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(bw.code)
		_, _ = w.Write(body)
	})
}

// bufferingWriter holds back a response whose content type want accepts;
// others are streamed.
type bufferingWriter struct {
	http.ResponseWriter
	want      func(contentType string) bool
	code      int
	decided   bool
	buffering bool
	sentHead  bool
	buf       bytes.Buffer
}

func (b *bufferingWriter) WriteHeader(code int) {
	if !b.decided {
		b.code = code
		return
	}
	if !b.buffering && !b.sentHead {
		b.sentHead = true
		b.ResponseWriter.WriteHeader(code)
	}
}

func (b *bufferingWriter) Write(p []byte) (int, error) {
	if !b.decided {
		b.decided = true
		ct := b.Header().Get("Content-Type")
		if ct == "" {
			ct = http.DetectContentType(p)
			b.Header().Set("Content-Type", ct)
		}
		b.buffering = b.want(ct)
	}
	if b.buffering {
		return b.buf.Write(p)
	}
	b.flushHeader()
	return b.ResponseWriter.Write(p)
}

func (b *bufferingWriter) flushHeader() {
	b.decided = true
	if !b.sentHead {
		b.sentHead = true
		b.ResponseWriter.WriteHeader(b.code)
	}
}

var externalStylesheet = regexp.MustCompile(`<link rel="stylesheet" href="https?://[^"]*"/?>`)

// rewriteIndex tags asynqmon's inline scripts with the nonce, adds the
// csp-nonce meta read by JSS and drops stylesheets from other hosts (Google
// Fonts: the UI falls back to the system font and loads nothing from
// outside).
func rewriteIndex(body []byte, nonce string) []byte {
	body = externalStylesheet.ReplaceAll(body, nil)
	body = bytes.ReplaceAll(body, []byte("<script>"), []byte(`<script nonce="`+nonce+`">`))
	return bytes.Replace(body, []byte("<head>"), []byte(`<head><meta property="csp-nonce" content="`+nonce+`"/>`), 1)
}

var errorMessageField = regexp.MustCompile(`"error_message":\s*"(?:[^"\\]|\\.)*"`)

// scrubErrorMessages masks card-like numbers in the "error_message" fields
// of asynqmon's JSON (a task's last error is not passed through the
// formatters). The string is decoded before scrubbing, so JSON escapes
// cannot hide or merge digits.
func scrubErrorMessages(body []byte) []byte {
	return errorMessageField.ReplaceAllFunc(body, func(m []byte) []byte {
		_, lit, _ := bytes.Cut(m, []byte(":"))
		var s string
		if err := json.Unmarshal(bytes.TrimSpace(lit), &s); err != nil {
			return []byte(`"error_message":"(unreadable)"`)
		}
		out, err := json.Marshal(card.Scrub(s))
		if err != nil {
			return []byte(`"error_message":"(unreadable)"`)
		}
		return append([]byte(`"error_message":`), out...)
	})
}
