package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acme/payout/internal/notify"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// TestPauseNotifies: pause and resume queue one signed-to-be event per
// URL (repeatable flag, comma-separated environment); a URL without the
// secret, or one that is not http(s), is a usage error before anything
// is done.
func TestPauseNotifies(t *testing.T) {
	mr := miniredis.RunT(t)
	run := func(env map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, nil, &out, &errb, func(k string) string { return env[k] })
		return code, out.String() + errb.String()
	}
	redisURL := "redis://" + mr.Addr()
	if code, out := run(nil, "pause", "--redis", redisURL, "--notify-url", "https://a.test/x"); code != ExitUsage || !strings.Contains(out, notify.SecretEnv) {
		t.Fatalf("no secret: exit %d: %s", code, out)
	}
	if code, out := run(map[string]string{notify.SecretEnv: "k"}, "pause", "--redis", redisURL, "--notify-url", "ftp://a.test/x"); code != ExitUsage {
		t.Fatalf("ftp URL: exit %d: %s", code, out)
	}
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	if _, err := asynq.NewClientFromRedisClient(rdb).Enqueue(asynq.NewTask("x", nil, asynq.Queue("payouts"))); err != nil {
		t.Fatal(err) // the queue exists once it had a task
	}
	if info, err := insp.GetQueueInfo("payouts"); err == nil && info.Paused {
		t.Fatal("a refused command paused the queue")
	}
	env := map[string]string{notify.SecretEnv: "k", "PAYOUT_NOTIFY_URL": "https://a.test/x, https://b.test/y"}
	for _, cmd := range []string{"pause", "resume"} {
		if code, out := run(env, cmd, "--redis", redisURL); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", cmd, code, out)
		}
	}
	tasks, err := insp.ListPendingTasks(notify.Queue)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, ti := range tasks {
		for _, k := range []notify.Type{notify.QueuePaused, notify.QueueResumed} {
			if strings.Contains(string(ti.Payload), `"type":"`+string(k)+`"`) {
				kinds[string(k)]++
			}
		}
	}
	if len(tasks) != 4 || kinds[string(notify.QueuePaused)] != 2 || kinds[string(notify.QueueResumed)] != 2 {
		t.Fatalf("%d tasks %v, want a pause and a resume for each of 2 URLs", len(tasks), kinds)
	}
}
