package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/acme/payout/internal/proof/testenv"
	"github.com/acme/payout/jobs"
)

// uiPaths are fetched from the web UI and kept for the leak scan.
var uiPaths = []string{
	"/api/batches",
	"/batches",
	queuesPath,
	"/monitoring/api/queues/" + jobs.Queue,
	"/monitoring/api/queues/" + jobs.Queue + "/active_tasks?page=1&size=500",
	"/monitoring/api/queues/" + jobs.Queue + "/pending_tasks?page=1&size=500",
	"/monitoring/api/queues/" + jobs.Queue + "/scheduled_tasks?page=1&size=500",
	"/monitoring/api/queues/" + jobs.Queue + "/retry_tasks?page=1&size=500",
	"/monitoring/api/queues/" + jobs.Queue + "/archived_tasks?page=1&size=500",
	"/monitoring/api/queues/" + jobs.Queue + "/completed_tasks?page=1&size=500",
}

// queuesPath lists the Asynq queues; the uiPaths after it are pages of the
// payout queue, which exists only once a task was enqueued on it.
const queuesPath = "/monitoring/api/queues"

// snapshotUI fetches every uiPaths page with basic auth into ui/. The
// payout queue's pages are skipped while the queue list does not name it
// (no task enqueued yet: asynqmon answers 404 for them).
func (h *harness) snapshotUI(ctx context.Context, phase string) {
	if h.ui == nil {
		return
	}
	fetched := 0
	for i, p := range uiPaths {
		var body []byte
		var last error
		err := testenv.Poll(ctx, 20*time.Second, 500*time.Millisecond, func() (bool, error) {
			last = httpGet(ctx, h.uiURL+p, h.uiUser, h.uiPass, &body)
			return last == nil, nil
		})
		if err != nil {
			h.problem("web UI: GET %s did not answer 200 (%v; last: %v)", p, err, last)
			continue
		}
		fetched++
		name := fmt.Sprintf("%s-%02d.txt", phase, i)
		if err := os.WriteFile(h.path(dirUI, name), append([]byte("GET "+p+"\n"), body...), 0o600); err != nil {
			h.problem("web UI: %v", err)
		}
		if p == queuesPath && !bytes.Contains(body, []byte(`"queue":"`+jobs.Queue+`"`)) {
			h.logf("web UI (%s): no %s queue yet (no task enqueued): its pages are not fetched", phase, jobs.Queue)
			break
		}
	}
	h.logf("web UI fetched (%s): %d pages", phase, fetched)
}

// httpGet GETs url (with basic auth when user is set) and wants a 200; the
// body goes to *body when body is not nil.
func httpGet(ctx context.Context, url, user, pass string, body *[]byte) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", req.URL.Path, resp.StatusCode)
	}
	if body != nil {
		*body = b
	}
	return nil
}
