package psp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"
)

// Verdict is what CheckAPI concluded about the PSP at the base URL.
type Verdict int

// The verdicts of CheckAPI.
const (
	// APIAccepted: the server answered like the PSP's API and took the token.
	APIAccepted Verdict = iota + 1
	// APITokenRefused: 401 or 403 to the request with the token.
	APITokenRefused
	// APINotPSP: an answer the PSP's API does not give (an HTML page, a
	// web server's plain-text 404, a 404 without asking for a token): the
	// base URL points elsewhere.
	APINotPSP
	// APIUnreachable: no answer, or one that tells nothing (429, 5xx).
	APIUnreachable
)

// APICheck is what CheckAPI found.
type APICheck struct {
	Verdict    Verdict
	HTTPStatus int    // of the request with the token
	Message    string // why, for a person; never the token
	Duration   time.Duration
}

// CheckAPI proves, without touching any order, that the base URL is the
// PSP's API and that it accepts the token. It queries the status of an id
// that cannot exist (payout-check-<random>). The reference documents
// neither the status answer's body nor a not-found body, only that every
// answer is JSON and that a missing or invalid token gives 401 (403 for a
// disabled account). So it accepts:
//
//   - a 200 whose body is an order status (the create answer's shape, with
//     the PSP's order id); or
//   - a 404 whose body is JSON, when the same query without a token is
//     answered 401 or 403: the path is behind the PSP's bearer
//     authentication and the token passed it.
//
// 401 or 403 with the token is APITokenRefused. An HTML page, a body that
// is not JSON (Go's "404 page not found", a proxy's error page), or a 404
// to the query without a token is APINotPSP. Anything else (no answer, 429,
// 5xx) is APIUnreachable.
func (c *Client) CheckAPI(ctx context.Context) APICheck {
	start := time.Now()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	path := statusPath("payout-check-" + hex.EncodeToString(b))
	tok, err := c.cfg.Token.Token()
	if err != nil {
		return APICheck{Verdict: APITokenRefused, Message: finish(c.redact(err.Error()))}
	}
	a, err := c.probe(ctx, path, tok)
	check := func(v Verdict, msg string) APICheck {
		return APICheck{Verdict: v, HTTPStatus: a.status, Message: finish(c.redact(msg)), Duration: time.Since(start)}
	}
	if err != nil {
		return check(APIUnreachable, "no answer: "+transportMessage(err))
	}
	what := a.describe()
	switch {
	case a.html():
		return check(APINotPSP, "answered like a web server, not the PSP: "+what+" is an HTML page; check --psp-url")
	case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
		return check(APITokenRefused, "the PSP refused the token: "+what)
	case a.status == http.StatusOK:
		res, _ := classifyOK(OpWithdrawalStatus, Result{}, a.body)
		if res.Outcome != Created {
			return check(APINotPSP, "answered like a web server, not the PSP: "+what+" is not an order status; check --psp-url")
		}
		return check(APIAccepted, "token accepted: "+what+" is an order status")
	case a.status == http.StatusNotFound:
		if !a.json() {
			return check(APINotPSP, "answered like a web server, not the PSP: "+what+" is not the PSP's JSON; check --psp-url")
		}
		anon, err := c.probe(ctx, path, "")
		if err != nil {
			return check(APIUnreachable, "the query without a token got no answer: "+transportMessage(err))
		}
		if anon.status != http.StatusUnauthorized && anon.status != http.StatusForbidden {
			return check(APINotPSP, "answered like a web server, not the PSP: the query without a token got "+anon.describe()+
				" where the PSP answers 401; check --psp-url")
		}
		return check(APIAccepted, "token accepted: "+what+" for an unknown order, HTTP "+strconv.Itoa(anon.status)+" without a token")
	}
	return check(APIUnreachable, "inconclusive: "+what)
}

// RecheckAPI is CheckAPI after a fresh read of the token from where it
// comes from: a token file is read again even when it looks unchanged (a
// token in the environment cannot change under a running process). A
// worker runs it after the PSP refused its credentials (internal/worker,
// authfault.go).
func (c *Client) RecheckAPI(ctx context.Context) APICheck {
	if f, ok := c.cfg.Token.(interface{ Forget() }); ok {
		f.Forget()
	}
	return c.CheckAPI(ctx)
}

// answer is one probe's answer: status, content type and the start of the
// body.
type answer struct {
	status int
	ctype  string
	body   []byte
}

// maxProbeBody bounds what a probe reads of an answer.
const maxProbeBody = 64 << 10

// probe sends a GET of path, with the bearer token when tok is not "".
func (c *Client) probe(ctx context.Context, path, tok string) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseStr+path, nil)
	if err != nil {
		return answer{}, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if err != nil {
		return answer{}, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return answer{status: resp.StatusCode, ctype: ct, body: body}, nil
}

func (a answer) html() bool {
	t := bytes.ToLower(bytes.TrimSpace(a.body))
	return a.ctype == "text/html" || bytes.HasPrefix(t, []byte("<!doctype html")) || bytes.HasPrefix(t, []byte("<html"))
}

// json reports whether the body is a JSON object (whatever the content
// type says: the reference shows none).
func (a answer) json() bool {
	var m map[string]any
	return json.Unmarshal(a.body, &m) == nil
}

// describe is "HTTP 404 (text/plain) "404 page not found"", bounded.
func (a answer) describe() string {
	s := "HTTP " + strconv.Itoa(a.status)
	if a.ctype != "" {
		s += " (" + a.ctype + ")"
	}
	body := bytes.TrimSpace(a.body)
	if len(body) > 80 {
		body = append(body[:77:77], "..."...)
	}
	if len(body) > 0 {
		s += " " + strconv.Quote(string(body))
	}
	return s
}
