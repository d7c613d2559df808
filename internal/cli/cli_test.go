package cli

import (
	"bytes"
	"io"
	"net"
	"net/http"

	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"

	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/sandbox"
	"github.com/rs/zerolog"
)

var update = flag.Bool("update", false, "rewrite the configuration tables in docs/configuration.md")

func testEnv(vars map[string]string) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdout: &out, stderr: &errb, getenv: func(k string) string { return vars[k] }}, &out, &errb
}

func TestEnvironmentFillsUnsetFlags(t *testing.T) {
	e, _, _ := testEnv(map[string]string{"PAYOUT_REDIS_URL": "redis://env:1/2", "PAYOUT_CONCURRENCY": "7", "PAYOUT_RATE": "5"})
	fs := newFlags(e, "worker", "")
	var rf redisFlags
	var wf workerFlags
	rf.register(fs)
	wf.register(fs)
	if err := parse(e, fs, []string{"--rate", "9"}); err != nil {
		t.Fatal(err)
	}
	if rf.url != "redis://env:1/2" || wf.concurrency != 7 || wf.rate != 9 {
		t.Fatalf("redis %q concurrency %d rate %d: want env for unset flags, the flag where given", rf.url, wf.concurrency, wf.rate)
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	e, _, _ := testEnv(nil)
	fs := newFlags(e, "load", "")
	var rf redisFlags
	rf.register(fs)
	dry := fs.Bool("dry-run", false, "")
	if err := parse(e, fs, []string{"a.csv", "--redis", "redis://x:1/0", "b.csv", "--dry-run", "--", "--c.csv"}); err != nil {
		t.Fatal(err)
	}
	if rf.url != "redis://x:1/0" || !*dry || strings.Join(fs.Args(), " ") != "a.csv b.csv --c.csv" {
		t.Fatalf("redis %q dry %v args %q", rf.url, *dry, fs.Args())
	}
}

func TestBadEnvironmentIsAUsageError(t *testing.T) {
	e, _, _ := testEnv(map[string]string{"PAYOUT_CONCURRENCY": "many"})
	fs := newFlags(e, "worker", "")
	var wf workerFlags
	wf.register(fs)
	err := parse(e, fs, nil)
	if code := exitCode(&bytes.Buffer{}, "worker", err); code != ExitUsage || !strings.Contains(err.Error(), "PAYOUT_CONCURRENCY") {
		t.Fatalf("exit %d, err %v", code, err)
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
	}{
		{"no command", nil, nil, ExitUsage},
		{"unknown command", []string{"frobnicate"}, nil, ExitUsage},
		{"unknown flag", []string{"load", "--nope"}, nil, ExitUsage},
		{"load without files", []string{"load"}, nil, ExitUsage},
		{"worker without PSP URL", []string{"worker"}, nil, ExitUsage},
		{"absence from a single 404", []string{"worker", "--psp-url", "http://x", "--absent-checks", "1"}, nil, ExitUsage},
		{"absence spacing shorter than the timeout", []string{"worker", "--psp-url", "http://x", "--absent-spacing", "5s"}, nil, ExitUsage},
		{"worker without token", []string{"worker", "--psp-url", "http://127.0.0.1:1"}, nil, ExitUsage},
		{"load without data key", []string{"load", "x.csv"}, nil, ExitUsage},
		{"redis unreachable", []string{"status", "--redis", "redis://127.0.0.1:1/0"}, nil, ExitInfra},
		{"bad redis URL", []string{"status", "--redis", "mysql://x"}, nil, ExitUsage},
		{"ui without credentials on a public address", []string{"ui", "--addr", "0.0.0.0:0", "--redis", "redis://127.0.0.1:1/0"}, nil, ExitUsage},
		{"ui four-eyes with the token only", []string{"ui", "--four-eyes", "--redis", "redis://127.0.0.1:1/0"}, map[string]string{"PAYOUT_UI_TOKEN": "t"}, ExitUsage},
		{"ui four-eyes with basic auth and the token", []string{"ui", "--four-eyes", "--redis", "redis://127.0.0.1:1/0"}, map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p", "PAYOUT_UI_TOKEN": "t"}, ExitUsage},
		{"ui four-eyes without credentials", []string{"ui", "--four-eyes", "--insecure-local", "--redis", "redis://127.0.0.1:1/0"}, nil, ExitUsage},
		{"ui four-eyes with basic auth (then no redis)", []string{"ui", "--four-eyes", "--redis", "redis://127.0.0.1:1/0"}, map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p"}, ExitInfra},
		{"ui upload without data key", []string{"ui", "--spool", "spool", "--redis", "redis://127.0.0.1:1/0"}, map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p"}, ExitUsage},
		{"ui upload with a bad approval mode", []string{"ui", "--spool", "spool", "--approval", "maybe", "--insecure-plaintext", "--redis", "redis://127.0.0.1:1/0"}, map[string]string{"PAYOUT_UI_USER": "u", "PAYOUT_UI_PASSWORD": "p"}, ExitUsage},
		{"sandbox p-fail without settle-after", []string{"sandbox", "--p-fail", "0.2", "--addr", "127.0.0.1:0"}, nil, ExitUsage},
		{"sandbox settings from PAYOUT_SANDBOX_*", []string{"sandbox", "--addr", "127.0.0.1:0"}, map[string]string{"PAYOUT_SANDBOX_P_FAIL": "0.2"}, ExitUsage},
		{"sandbox callback without secret", []string{"sandbox", "--settle-after", "1s", "--callback-url", "http://127.0.0.1:1/cb", "--addr", "127.0.0.1:0"}, nil, ExitUsage},
		{"run sandbox p-fail without settle-after", []string{"run", "--sandbox", "--p-fail", "0.2", "../../samples/payouts-good.csv"}, nil, ExitUsage},
		{"run sandbox with the same status words", []string{"run", "--sandbox", "--settle-after", "1s", "--paid-status", "X", "--failed-status", "X", "../../samples/payouts-good.csv"}, nil, ExitUsage},
		{"help", []string{"help"}, nil, ExitOK},
		{"keygen", []string{"keygen"}, nil, ExitOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			got := Main(ctx, tt.args, nil, &out, &errb, func(k string) string { return tt.env[k] })
			if got != tt.want {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", got, tt.want, out.String(), errb.String())
			}
		})
	}
}

// TestRunDemoFile runs the one-shot mode on the good sample with the
// in-process simulator and an embedded Redis: the same path as make demo.
func TestRunDemoFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.csv")
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"run", "--sandbox", "--seed", "3", "--p-ambiguous", "0.3",
		"--status-delay", "100ms", "--absent-spacing", "1s", "--psp-timeout", "1s", "--hang-for", "2s",
		"--log-level", "error", "--out", out, "../../samples/payouts-good.csv"}, nil, &stdout, &stderr, func(string) string { return "" })
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "#") || strings.Contains(string(b), "\n\n") || strings.Count(string(b), ",created,WD-") != 20 {
		t.Fatalf("result file (want a clean table of 20 created rows):\n%s", b)
	}
	sum, err := os.ReadFile(filepath.Join(filepath.Dir(out), "r.summary.txt"))
	if err != nil || !strings.Contains(string(sum), "reconciled: ") {
		t.Fatalf("summary file: %v\n%s", err, sum)
	}
	if !strings.Contains(stdout.String(), "reconciled:") || strings.Contains(stdout.String()+stderr.String(), "4111111111111111") {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
}

const tableStart, tableEnd = "<!-- flags:start -->", "<!-- flags:end -->"

// configurationDoc holds the generated flag tables, between tableStart and
// tableEnd.
const configurationDoc = "../../docs/configuration.md"

// TestConfigurationTable keeps the flag tables of docs/configuration.md
// equal to the flags the commands really have (go test -update rewrites
// them).
func TestConfigurationTable(t *testing.T) {
	var b strings.Builder
	for _, c := range commands() {
		e, _, _ := testEnv(nil)
		var fs *flag.FlagSet
		// Each command registers its flags then parses; -h makes it stop
		// right after, with the FlagSet captured through the usage hook.
		captured := captureFlags(c, e)
		fs = captured
		if fs == nil {
			continue
		}
		fmt.Fprintf(&b, "\n**payout %s**: %s\n\n| flag | environment | default | meaning |\n|---|---|---|---|\n", c.name, c.usage)
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		sort.Strings(names)
		for _, n := range names {
			f := fs.Lookup(n)
			def := f.DefValue
			if def == "" {
				def = " "
			} else {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", n, envName(fs.Name(), n), def, strings.ReplaceAll(f.Usage, "|", "\\|"))
		}
	}
	want := b.String()
	doc, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the %s ... %s markers", configurationDoc, tableStart, tableEnd)
	}
	got := s[i+len(tableStart) : j]
	if got == want {
		return
	}
	if *update {
		s = s[:i+len(tableStart)] + want + s[j:]
		if err := os.WriteFile(configurationDoc, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s is out of date: run go test ./internal/cli -run TestConfigurationTable -update", configurationDoc)
}

// captureFlags runs a command with -h and returns its FlagSet.
func captureFlags(c command, e *env) *flag.FlagSet {
	var fs *flag.FlagSet
	flagSetHook = func(f *flag.FlagSet) { fs = f }
	defer func() { flagSetHook = nil }()
	_ = c.run(context.Background(), e, []string{"-h"})
	return fs
}

// TestWorkerCheck: --check proves that --psp-url is the PSP's API and
// that it takes the token, touching no payout and needing no Redis: a web
// server's 404 (Go's plain-text one, an HTML page, a JSON 404 that asks
// for no token) fails it, a wrong token is refused, and the token never
// shows.
func TestWorkerCheck(t *testing.T) {
	psp := httptest.NewServer(sandbox.New(sandbox.DefaultConfig(), zerolog.Nop()).Handler())
	defer psp.Close()
	plain := httptest.NewServer(http.NewServeMux()) // "404 page not found", text/plain
	defer plain.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<html><body>Not Found</body></html>")
	}))
	defer html.Close()
	openJSON := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"no route"}`)
	}))
	defer openJSON.Close()
	for _, c := range []struct {
		name, url, token string
		want             int
		say              string
	}{
		{"the PSP, its token", psp.URL, sandbox.DefaultToken, ExitOK, "token was accepted"},
		{"the PSP, a wrong token", psp.URL, "wrong-token-123", ExitUsage, "refused the token: HTTP 401"},
		{"Go's plain 404", plain.URL, sandbox.DefaultToken, ExitUsage, "answered like a web server, not the PSP: HTTP 404 (text/plain) \"404 page not found\" is not the PSP's JSON; check --psp-url"},
		{"an HTML page", html.URL, sandbox.DefaultToken, ExitUsage, "answered like a web server, not the PSP: HTTP 404 (text/html)"},
		{"JSON 404 without authentication", openJSON.URL, sandbox.DefaultToken, ExitUsage, "the query without a token got HTTP 404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			got := Main(context.Background(), []string{"worker", "--check", "--psp-url", c.url, "--redis", "redis://127.0.0.1:1/0"}, nil, &out, &errb,
				func(k string) string { return map[string]string{"PAYOUT_PSP_TOKEN": c.token}[k] })
			all := out.String() + errb.String()
			if got != c.want || !strings.Contains(all, c.say) {
				t.Errorf("exit %d, want %d saying %q:\n%s", got, c.want, c.say, all)
			}
			if strings.Contains(all, c.token) {
				t.Errorf("the token appears in the output")
			}
		})
	}
}

// TestUIServes starts `payout ui` against an embedded Redis and fetches a
// page with basic auth.
func TestUIServes(t *testing.T) {
	mr := miniredis.RunT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"ui", "--addr", addr, "--redis", "redis://" + mr.Addr(), "--log-level", "error",
			"--spool", t.TempDir(), "--insecure-plaintext", "--approval", "required"}, nil, &bytes.Buffer{}, &stderr,
			func(k string) string {
				return map[string]string{"PAYOUT_UI_USER": "ops", "PAYOUT_UI_PASSWORD": "pw-123"}[k]
			})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://"+addr+"/batches", nil)
		req.SetBasicAuth("ops", "pw-123")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `action="/batches/upload"`) {
				t.Fatalf("/batches: HTTP %d without the upload form:\n%s", resp.StatusCode, body)
			}
			break
		}
		select {
		case code := <-done:
			t.Fatalf("payout ui exited %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("payout ui did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d after shutdown: %s", code, stderr.String())
	}
}
