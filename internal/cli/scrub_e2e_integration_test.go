//go:build integration

package cli

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testenv/gobuild"
	"github.com/acme/payout/internal/proof/testenv/proc"
	"github.com/acme/payout/internal/proof/testenv/redistest"
	"github.com/acme/payout/internal/vault"
)

// e2eToken is the PSP token of TestTypedTextEndToEnd: 37 characters, with
// the '/' and '+' that JSON, HTML and URL escaping change.
const e2eToken = "pT9/xq2+Lm7/Zw4kR8vN1bYc6Hd3Fs0Je5Uab"

// e2eCard is the card number an operator pastes.
const e2eCard = "4111111111111111"

// echoPSP answers like a gateway in front of the wrong URL that shows the
// request's Authorization header, placed so that the 300-character message
// limit cuts the token: payout TJ-1's create gets a 400 whose JSON message
// has it JSON-escaped ("\/"); every other request a 502 HTML page with it
// HTML-escaped ("&#x2F;", "&#43;").
func echoPSP(t *testing.T) *httptest.Server {
	pad := strings.Repeat("x", 220)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		var in struct {
			ExternalID string `json:"externalId"`
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &in)
		if r.Method == http.MethodPost && in.ExternalID == "TJ-1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"message":"`+pad+` request headers: Authorization: `+strings.ReplaceAll(auth, "/", `\/`)+`"}`)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		esc := strings.NewReplacer("/", "&#x2F;", "+", "&#43;").Replace(html.EscapeString(auth))
		_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1><pre>"+pad[:150]+" Authorization: "+esc+"</pre></body></html>")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tokenPieces names the pieces of e2eToken of 12 or more characters in
// text, plain or unescaped once (JSON, HTML): the test's own reading,
// independent of the scrubber.
func tokenPieces(text string) []string {
	forms := []string{text, strings.ReplaceAll(text, `\/`, "/"), html.UnescapeString(text),
		strings.NewReplacer(`\u002b`, "+", `\u002f`, "/", `\u0026`, "&").Replace(text)}
	var out []string
	for i := 0; i+12 <= len(e2eToken); i++ {
		for _, f := range forms {
			if strings.Contains(f, e2eToken[i:i+12]) {
				out = append(out, e2eToken[i:i+12])
				break
			}
		}
	}
	return out
}

// holdsCard tells whether text shows e2eCard, whatever separators it was
// pasted with.
func holdsCard(text string) bool {
	return strings.Contains(strings.NewReplacer(" ", "", "-", "", `\u00a0`, "", "\u00a0", "").Replace(text), e2eCard)
}

// redisText is every key and value of the Redis database, as text.
func redisText(t *testing.T, url string) string {
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\n")
		switch rdb.Type(ctx, k).Val() {
		case "hash":
			for f, v := range rdb.HGetAll(ctx, k).Val() {
				b.WriteString(f + "=" + v + "\n")
			}
		case "stream":
			for _, m := range rdb.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					b.WriteString(f + "=" + toString(v) + "\n")
				}
			}
		case "string":
			b.WriteString(rdb.Get(ctx, k).Val() + "\n")
		case "list":
			b.WriteString(strings.Join(rdb.LRange(ctx, k, 0, -1).Val(), "\n"))
		case "set":
			b.WriteString(strings.Join(rdb.SMembers(ctx, k).Val(), "\n"))
		case "zset":
			b.WriteString(strings.Join(rdb.ZRange(ctx, k, 0, -1).Val(), "\n"))
		}
	}
	return b.String()
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// xlsxText is the text of every part of a workbook.
func xlsxText(t *testing.T, path string) string {
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var b bytes.Buffer
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(&b, rc)
		rc.Close()
	}
	return b.String()
}

// TestTypedTextEndToEnd runs the real binary against a far end that
// echoes the PSP token, then resolves the payout left for review with a
// card number pasted into the PSP order id, the PSP status and the note.
// Nothing of 12 or more characters of the token is in the ledger, the
// result file, the reports or the log; the card number is masked in the
// ledger, the reports in CSV, XLSX and JSON and the history (text and
// JSON); a note with a carriage return (a forged "bob approved" line) is
// refused with nothing changed.
func TestTypedTextEndToEnd(t *testing.T) {
	bin := gobuild.Binary(t, "github.com/acme/payout/cmd/payout")
	dir := t.TempDir()
	file := filepath.Join(dir, "payouts.csv")
	if err := os.WriteFile(file, []byte("externalId,amount,cardNumber,telecomOperator\nTJ-1,10.00,,MTS\nTH-1,20.00,,MTS\nTH-2,30.00,,MTS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	psp := echoPSP(t)
	redisURL := redistest.StartConfig(t, redistest.Config{AOF: true}).URL()
	key, err := vault.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.CleanEnv("PAYOUT_PSP_TOKEN="+e2eToken, "PAYOUT_DATA_KEY="+key, "PAYOUT_REDIS="+redisURL)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := func(name string, args ...string) (int, string) {
		t.Helper()
		log := filepath.Join(dir, name+".log")
		u, _, err := proc.Run(ctx, proc.Spec{Name: "payout " + name, Bin: bin, Args: args, Env: env, Log: log})
		if err != nil {
			t.Fatalf("payout %s: %v", name, err)
		}
		out, _ := os.ReadFile(log)
		return u.ExitCode, string(out)
	}

	result := filepath.Join(dir, "result.csv")
	code, runLog := run("run", "run", "--psp-url", psp.URL, "--track-outcome=false", "--concurrency", "2",
		"--psp-timeout", "2s", "--status-delay", "100ms", "--max-status-checks", "2",
		"--log-level", "debug", "--log-format", "json", "--out", result, file)
	if code == ExitOK {
		t.Fatalf("run ended well against a PSP that only echoes:\n%s", runLog)
	}
	raw, err := os.ReadFile(result)
	if err != nil {
		t.Fatalf("no result file: %v\n%s", err, runLog)
	}
	if !strings.Contains(string(raw), "withheld") {
		t.Errorf("the result file does not say the PSP message was withheld:\n%s", raw)
	}
	for where, text := range map[string]string{"worker log": runLog, "result file": string(raw), "ledger": redisText(t, redisURL)} {
		if p := tokenPieces(text); len(p) > 0 {
			t.Errorf("%s holds %d pieces of the token, first %q", where, len(p), p[0])
		}
	}

	// A carriage return in a note would forge a line on a terminal.
	if code, out := run("resolve-cr", "resolve", file, "TH-2", "--as", "rejected", "--by", me.Username,
		"--note", "checked\rbob approved"); code == ExitOK {
		t.Errorf("a note with a carriage return was taken:\n%s", out)
	}
	pasted := "4111 1111 1111 1111"
	// "Mark created" asks the PSP first: this one only echoes, so a card
	// pasted as the order id is refused, and its answer shows nothing of
	// the card or the token.
	if code, out := run("resolve-order", "resolve", file, "TH-1", "--as", "created", "--by", me.Username, "--psp-url", psp.URL,
		"--psp-order", e2eCard, "--psp-status", "paid to "+pasted, "--note", "card "+pasted+" confirmed by phone"); code == ExitOK {
		t.Errorf("a card pasted as the order id was taken without the PSP's word:\n%s", out)
	} else if holdsCard(out) || len(tokenPieces(out)) > 0 {
		t.Errorf("the refusal shows the card or the token:\n%s", out)
	}
	if code, out := run("resolve", "resolve", file, "TH-1", "--recheck", "--by", me.Username,
		"--note", "card "+pasted+" confirmed by phone"); code != ExitOK {
		t.Fatalf("resolve: exit %d\n%s", code, out)
	}

	texts := map[string]string{"ledger": redisText(t, redisURL)}
	for _, ext := range []string{"csv", "json", "xlsx"} {
		out := filepath.Join(dir, "report."+ext)
		if code, log := run("report-"+ext, "report", file, "--out", out); code != ExitOK && code != ExitRejected {
			t.Fatalf("report %s: exit %d\n%s", ext, code, log)
		}
		if ext == "xlsx" {
			texts["report xlsx"] = xlsxText(t, out)
			continue
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		texts["report "+ext] = string(b)
	}
	_, texts["history"] = run("history", "history", file)
	_, texts["history json"] = run("history-json", "history", file, "--json")
	if !strings.Contains(texts["report csv"], "411111******1111") {
		t.Errorf("the report does not show the masked order id:\n%s", texts["report csv"])
	}
	for where, text := range texts {
		if holdsCard(text) {
			t.Errorf("%s shows the card number in clear:\n%s", where, text)
		}
		if p := tokenPieces(text); len(p) > 0 {
			t.Errorf("%s holds %d pieces of the token, first %q", where, len(p), p[0])
		}
	}
	if strings.Contains(texts["history"], "bob approved") {
		t.Errorf("the refused note is in the history:\n%s", texts["history"])
	}
}
