package psp_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/scrub"
)

// echoToken is a token of 37 characters with the '/' and '+' that JSON,
// HTML and URL escaping change.
const echoToken = "pT9/xq2+Lm7/Zw4kR8vN1bYc6Hd3Fs0Je5Uab"

// tokenLeaks names the pieces of the token of 12 or more characters found
// in text, plain or unescaped once (JSON, HTML, URL): the test's own
// reading, independent of the scrubber.
func tokenLeaks(text string) []string {
	forms := []string{text, strings.ReplaceAll(text, `\/`, "/"), html.UnescapeString(text)}
	if u, err := url.QueryUnescape(text); err == nil {
		forms = append(forms, u)
	}
	var out []string
	for i := 0; i+12 <= len(echoToken); i++ {
		for _, f := range forms {
			if strings.Contains(f, echoToken[i:i+12]) {
				out = append(out, echoToken[i:i+12])
				break
			}
		}
	}
	return out
}

// TestTokenEchoedIsWithheld: a far end that echoes the Authorization
// header (a wrong --psp-url, a gateway's error page), JSON-escaped,
// HTML-escaped or URL-encoded, placed so that the 300-character message
// limit cuts the token: nothing of 12 or more of its characters is in the
// result or the client's log, and the message says it was withheld. The
// token was recognised only plain and after the cut, which kept 27 of its
// 37 characters.
func TestTokenEchoedIsWithheld(t *testing.T) {
	header := "Authorization: Bearer " + echoToken
	pad := strings.Repeat("x", 220) // the token straddles the 300-character cut
	for _, tc := range []struct {
		name, ctype, body string
		status            int
	}{
		{"json slash", "application/json", `{"message":"` + pad + " request headers: " + strings.ReplaceAll(header, "/", `\/`) + `"}`, 400},
		{"json unicode", "application/json", `{"message":"` + pad + " " + strings.NewReplacer("/", `\u002F`, "+", `\u002b`).Replace(header) + `"}`, 502},
		{"html", "text/html", "<html><body><h1>502 Bad Gateway</h1><pre>" + pad + html.EscapeString(strings.ReplaceAll(header, "/", "&#x2F;")) + "</pre></body></html>", 502},
		{"url", "text/plain", pad + " GET /?auth=" + url.QueryEscape(header), 404},
		{"plain cut", "text/plain", pad + "   " + header, 500},
		{"200 echo", "application/json", `{"pspDepositOrderID":"o-1","status":"` + strings.ReplaceAll(header, "/", `\/`) + `"}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer ts.Close()
			var log strings.Builder
			c := newClient(t, ts.URL, func(c *psp.Config) {
				c.Token = psp.StaticToken(echoToken)
				c.Logger = zerolog.New(&log).Level(zerolog.DebugLevel)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			for _, res := range []psp.Result{
				c.CreateWithdrawal(ctx, withdrawal("E-echo", "10.00", testCard)),
				c.WithdrawalStatus(ctx, "E-echo"),
			} {
				b, _ := json.Marshal(res)
				if l := tokenLeaks(string(b)); len(l) > 0 {
					t.Errorf("result holds the token %q: %s", l, b)
				}
				if res.Outcome == psp.Created {
					t.Errorf("an echo of the token was taken as an order: %s", b)
				}
				if !strings.Contains(res.Message, scrub.Withheld) {
					t.Errorf("message %q does not say it was withheld", res.Message)
				}
			}
			if l := tokenLeaks(log.String()); len(l) > 0 {
				t.Errorf("client log holds the token %q:\n%s", l, log.String())
			}
		})
	}
}
