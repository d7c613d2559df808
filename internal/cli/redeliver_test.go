package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/notify"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

// TestRedeliverCommand: payout redeliver by a person holding operator
// queues a failed event again and says so; the same by a viewer is
// refused (TestEveryCommandChecksItsRole) and queues nothing.
func TestRedeliverCommand(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	d, err := notify.NewDeliverer("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"id": "ev1"})
	p, _ := json.Marshal(map[string]any{"url": down.URL, "id": "ev1", "type": "payout.paid", "body": json.RawMessage(body)})
	if d.Logging(rdb).ProcessTask(t.Context(), asynq.NewTask(notify.TypeDeliver, p)) == nil {
		t.Fatal("a 503 delivered")
	}
	ep := notify.EndpointID(down.URL)
	roles := filepath.Join(t.TempDir(), "roles")
	if err := os.WriteFile(roles, []byte("person olga: operator\ndefault: viewer\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PAYOUT_ROLES_FILE": roles}
	args := []string{"redeliver", "--redis", "redis://" + mr.Addr(), "--event", "ev1", "--note", "receiver fixed", ep}
	pending := func() int {
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetQueueInfo(notify.Queue)
		if err != nil {
			return 0
		}
		return info.Pending
	}
	withAccount(osAccount{"1000", "vic"}, func() {
		if code, _, errs := runMain(t, env, args...); code != ExitRejected || !strings.Contains(errs, "needs the operator role; vic holds viewer") {
			t.Fatalf("a viewer's redeliver: exit %d %s", code, errs)
		}
	})
	if n := pending(); n != 0 {
		t.Fatalf("a refused redeliver queued %d deliveries", n)
	}
	withAccount(osAccount{"1000", "olga"}, func() {
		if code, out, errs := runMain(t, env, args...); code != ExitOK || !strings.Contains(out, "event ev1 queued again for endpoint "+ep+" by olga") {
			t.Fatalf("an operator's redeliver: exit %d %s%s", code, out, errs)
		}
	})
	if n := pending(); n != 1 {
		t.Fatalf("%d deliveries queued, want 1", n)
	}
}
