package worker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/sandbox"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// TestPayoutEventsArriveInSequence: every state change of every payout is
// delivered, Standard Webhooks-signed, with the payout's sequence numbers
// 1..n complete, the last one the payout's final state, and only the
// masked destination.
func TestPayoutEventsArriveInSequence(t *testing.T) {
	t.Parallel()
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("worker-events-test-key-32-bytes!"))
	var mu sync.Mutex
	seqs := map[string][]int64{}
	types := map[string]map[int64]string{} // externalId -> sequence -> type
	recv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev notify.Event
		if notify.VerifyStandard(secret, body, r.Header) != nil || json.Unmarshal(body, &ev) != nil {
			w.WriteHeader(nethttp.StatusUnauthorized)
			return
		}
		if ev.Payout == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seqs[ev.ExternalID] = append(seqs[ev.ExternalID], ev.Sequence)
		if types[ev.ExternalID] == nil {
			types[ev.ExternalID] = map[int64]string{}
		}
		types[ev.ExternalID][ev.Sequence] = string(ev.Type)
		if ev.Payout.Destination == "" || strings.Contains(string(body), visa) {
			t.Errorf("event %s destination %q", ev.ID, ev.Payout.Destination)
		}
	}))
	defer recv.Close()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	d, err := notify.NewDeliverer(secret, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Notify = NotifyConfig{Emitter: notify.NewEmitter(h.rdb, []string{recv.URL}), Deliverer: d.Logging(h.rdb)}
	ids := h.add(visa, visa, visa)
	h.start()
	h.waitFinal(10 * time.Second)
	final := map[string]string{}
	for _, id := range ids {
		final[id] = "payout." + string(h.payout(id).State)
	}
	h.waitFor("every payout's events", 15*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			s := append([]int64(nil), seqs[id]...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			if len(s) == 0 || types[id][s[len(s)-1]] != final[id] {
				return false
			}
			for i, n := range s {
				if n != int64(i+1) {
					return false
				}
			}
		}
		return true
	})
}

// TestEventsPumpSaysWhenRedisIsAway: a pump whose Redis does not answer
// fails its lease every round and says so once (a minute's sample), not
// five times a second.
func TestEventsPumpSaysWhenRedisIsAway(t *testing.T) {
	t.Parallel()
	h := newHarness(t, fastConfig(), sandbox.Config{})
	dead := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(closedPortURL(t), "http://"), MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	var tries atomic.Int64
	dead.AddHook(countingHook{&tries})
	logs := &syncBuffer{}
	w := h.worker(dead, ledger.New(dead), fastConfig(), zerolog.New(logs))
	ctx, cancel := context.WithCancel(context.Background())
	wait := w.pumpEvents(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for tries.Load() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the pump tried its lease %d times in 20 s", tries.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wait()
	if n := strings.Count(logs.String(), "could not take the events lease"); n != 1 {
		t.Errorf("%d lease failures logged %d times, want once:\n%s", tries.Load(), n, logs.String())
	}
}

// countingHook counts the commands a client tries.
type countingHook struct{ n *atomic.Int64 }

func (countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
