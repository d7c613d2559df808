package worker

import (
	"encoding/base64"
	"encoding/json"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/notify"
	"github.com/acme/payout/internal/sandbox"
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
