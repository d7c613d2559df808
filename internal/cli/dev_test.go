package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/internal/proof/testlog"
)

// TestDevStack: payout dev starts the embedded Redis, the simulator, a
// worker and the console; the file its help names loads through the
// printed environment and every payout is paid; Ctrl-C stops it all.
func TestDevStack(t *testing.T) {
	addr := func() string {
		p, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("127.0.0.1:%d", p)
	}
	redisAddr, pspAddr, uiAddr := addr(), addr(), addr()
	ctx, cancel := context.WithCancel(context.Background())
	var out testlog.Buffer
	var errs testlog.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"dev", "--redis-listen", redisAddr, "--psp-listen", pspAddr, "--console-listen", uiAddr, "--settle-after", "200ms"},
			nil, &out, &errs, func(string) string { return "" })
	}()
	var key string
	if err := testenv.Poll(ctx, 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		m := regexp.MustCompile(`PAYOUT_DATA_KEY=(\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			return false, nil
		}
		key = m[1]
		res, err := http.Get("http://" + uiAddr + "/")
		if err != nil {
			return false, nil
		}
		res.Body.Close()
		return res.StatusCode == http.StatusUnauthorized, nil
	}); err != nil {
		t.Fatalf("the console did not ask for a sign-in: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errs.String())
	}
	env := map[string]string{"PAYOUT_REDIS": "redis://" + redisAddr + "/0", "PAYOUT_DATA_KEY": key, "PAYOUT_ALLOW_VOLATILE_REDIS": "true"}
	getenv := func(k string) string { return env[k] }
	var lout, lerr bytes.Buffer
	if code := Main(ctx, []string{"load", "../../samples/payouts-good.csv"}, nil, &lout, &lerr, getenv); code != ExitOK {
		t.Fatalf("load through the printed environment: exit %d\n%s", code, lerr.String())
	}
	if err := testenv.Poll(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, error) {
		var sout, serr bytes.Buffer
		Main(ctx, []string{"status", "../../samples/payouts-good.csv"}, nil, &sout, &serr, getenv)
		return strings.Contains(sout.String(), "finished"), nil
	}); err != nil {
		t.Fatalf("the batch did not finish on the stack: %v\n%s", err, errs.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("Ctrl-C: exit %d\n%s", code, errs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("payout dev did not stop after Ctrl-C")
	}
}
