package notify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/rs/zerolog"
)

// verdict is one line of the node receiver (testdata/verifier/receiver.js).
type verdict struct {
	Listening int    `json:"listening"`
	ID        string `json:"id"`
	OK        bool   `json:"ok"`
	Type      string `json:"type"`
	Error     string `json:"error"`
}

// startVerifier runs the independent receiver with secret and returns its
// URL and its verdicts. Under CI=true a missing node or package fails.
func startVerifier(t *testing.T, secret string) (string, <-chan verdict) {
	t.Helper()
	node := testenv.NeedTool(t, "node")
	dir, _ := filepath.Abs(filepath.Join("testdata", "verifier"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks")); err != nil {
		testenv.Missing(t, "the standardwebhooks npm package is not installed (npm ci --prefix internal/notify/testdata/verifier)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "receiver.js")
	cmd.Dir = dir
	cmd.Env = append(testenv.CleanEnv(), "VERIFIER_SECRET="+secret)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	ch := make(chan verdict, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var v verdict
			if json.Unmarshal(sc.Bytes(), &v) == nil {
				ch <- v
			}
		}
		close(ch)
	}()
	select {
	case v := <-ch:
		if v.Listening == 0 {
			t.Fatalf("receiver said %+v first", v)
		}
		return fmt.Sprintf("http://127.0.0.1:%d/hook", v.Listening), ch
	case <-time.After(20 * time.Second):
		t.Fatal("the node receiver did not start")
	}
	return "", nil
}

func next(t *testing.T, ch <-chan verdict) verdict {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("no verdict from the node receiver")
	}
	return verdict{}
}

// TestIndependentVerifier: a receiver written with the standardwebhooks
// npm package, knowing only the old secret of a rotation, accepts every
// real delivery, and rejects a replayed one (a captured request sent ten
// minutes later: its timestamp is old) and a re-signed one (another
// secret).
func TestIndependentVerifier(t *testing.T) {
	u, verdicts := startVerifier(t, oldSecret)
	rdb := newRedis(t)
	ctx := context.Background()
	em := NewEmitter(rdb, []string{u})
	want := map[string]bool{}
	for _, ev := range []Event{
		AwaitingApproval("b1", "approval required"),
		PayoutEvent(PayoutChange{Batch: "b1", ExternalID: "PO-1", Seq: 1, Type: "payout.paid", From: "created", To: "paid",
			At: time.Now(), Amount: "250.50", Dest: "card 555555******4444"}),
		Final("b1", map[string]string{"paid": "250.50"}),
	} {
		if err := em.Emit(ctx, ev); err != nil {
			t.Fatal(err)
		}
		want[ev.ID] = true
	}
	d, err := NewDeliverer(newSecret+" "+oldSecret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if left := Drain(ctx, rdb, d, 30*time.Second); left != 0 {
		t.Fatalf("%d deliveries left", left)
	}
	for range want {
		v := next(t, verdicts)
		if !v.OK || !want[v.ID] {
			t.Fatalf("real delivery refused by the independent verifier: %+v", v)
		}
	}
	body, _ := json.Marshal(PayoutEvent(PayoutChange{Batch: "b1", ExternalID: "PO-1", Seq: 2, Type: "payout.returned", To: "returned"}))
	for name, c := range map[string]struct {
		secrets string
		at      time.Time
	}{
		"replayed":  {newSecret + " " + oldSecret, time.Now().Add(-10 * time.Minute)},
		"re-signed": {strange, time.Now()},
	} {
		s, err := NewSigner(c.secrets)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		if err := s.Headers(req.Header, "ev-"+name, "payout.returned", c.at, body); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if v := next(t, verdicts); v.OK || resp.StatusCode != http.StatusUnauthorized || v.ID != "ev-"+name {
			t.Fatalf("%s delivery: HTTP %d, verdict %+v; want refused", name, resp.StatusCode, v)
		}
	}
}
