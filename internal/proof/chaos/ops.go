package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/acme/payout/jobs"
)

// opsStates are the task lists of the payout queue the suite deletes and
// archives from: tasks waiting to run (an active task can only be
// cancelled, which asynq retries).
var opsStates = []string{"pending", "scheduled", "retry"}

// opsTask is a task as asynqmon lists it; only the ID is kept (payloads
// are scrubbed, and never written anywhere).
type opsTask struct {
	state, id string
}

// deleteTasks plays a careless operator: it lists the waiting tasks of
// the payout queue through the read-write web UI's API (asynqmon) and
// deletes or archives up to TaskDeletes of them, picked at random. Each
// one loses a payout its reminder; the workers' reconciler must restore
// it. Errors (Redis restarting) skip the round.
func (h *harness) deleteTasks(ctx context.Context) {
	if h.ops == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	base := h.opsURL + "/monitoring/api/queues/" + url.PathEscape(jobs.Queue) + "/"
	var found []opsTask
	for _, st := range opsStates {
		var body []byte
		if err := httpGet(ctx, base+st+"_tasks?page=1&size=100", h.uiUser, h.uiPass, &body); err != nil {
			continue
		}
		var list struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			h.logf("web UI API: %s tasks: %v", st, err)
			continue
		}
		for _, t := range list.Tasks {
			found = append(found, opsTask{state: st, id: t.ID})
		}
	}
	h.rng.Shuffle(len(found), func(i, j int) { found[i], found[j] = found[j], found[i] })
	for _, t := range found[:min(len(found), h.cfg.TaskDeletes)] {
		archive := h.rng.IntN(2) == 0
		method, u := http.MethodDelete, base+t.state+"_tasks/"+url.PathEscape(t.id)
		if archive {
			method, u = http.MethodPost, u+":archive"
		}
		// A task that ran meanwhile is not found: asynqmon answers 500
		// ("task not found"); that is no deletion, and no problem.
		if err := opsCall(ctx, method, u, h.uiUser, h.uiPass); err != nil {
			continue
		}
		if archive {
			h.tasksArchived++
		} else {
			h.tasksDeleted++
		}
	}
}

// opsCall sends a state-changing request with basic auth and wants a 204.
func opsCall(ctx context.Context, method, u, user, pass string) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s %s: HTTP %d", method, req.URL.Path, resp.StatusCode)
	}
	return nil
}
