package bench

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// The fast path's task moves leave what an Asynq server leaves: one task
// completed by a server, one of the same shape by dequeueTask and
// completeTask, and the two hashes, messages and completed-set scores
// compared.
func TestFastTaskMovesMatchAsynq(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := asynq.NewClientFromRedisClient(rdb)
	enqueue := func(ext string) string {
		task, err := queue.Step{Kind: queue.Create, Batch: "b1", ExternalID: ext, N: 1, Amount: "10.00", Destination: "card 411111******1111"}.AsynqTask(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(task); err != nil {
			t.Fatal(err)
		}
		return jobs.CreateTaskID(ext, 1)
	}
	byServer := enqueue("PO-A")
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 1, Queues: map[string]int{jobs.Queue: 1},
		TaskCheckInterval: 10 * time.Millisecond, LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	completed := asynqKey(jobs.Queue, "completed")
	for rdb.ZCard(ctx, completed).Val() < 1 {
		if ctx.Err() != nil {
			t.Fatal("the server did not complete the task")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Shutdown()

	byUs := enqueue("PO-B")
	task, err := dequeueTask(ctx, rdb, jobs.Queue)
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != byUs || task.Type != jobs.TypeWithdrawalCreate || task.Retention != int64(jobs.Retention.Seconds()) {
		t.Fatalf("dequeued %+v", task)
	}
	if err := completeTask(ctx, rdb, task); err != nil {
		t.Fatal(err)
	}
	if _, err := dequeueTask(ctx, rdb, jobs.Queue); err != errNoTask {
		t.Fatalf("second dequeue: %v, want errNoTask", err)
	}

	hash := func(id string) map[string]string {
		return rdb.HGetAll(ctx, asynqKey(jobs.Queue, "t:"+id)).Val()
	}
	a, b := hash(byServer), hash(byUs)
	if fieldNames(a) != fieldNames(b) || a["state"] != "completed" || b["state"] != "completed" {
		t.Fatalf("task hashes: server %q, ours %q", fieldNames(a), fieldNames(b))
	}
	// The messages differ only in the id (same length) and completed_at.
	norm := func(m string) string {
		out, err := withCompletedAt([]byte(strings.NewReplacer("PO-A", "PO-X", "PO-B", "PO-X").Replace(m)), 1)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if norm(a["msg"]) != norm(b["msg"]) || len(a["msg"]) != len(b["msg"]) {
		t.Fatalf("messages differ:\nserver %x\nours   %x", a["msg"], b["msg"])
	}
	for _, id := range []string{byServer, byUs} {
		info, err := asynq.NewInspectorFromRedisClient(rdb).GetTaskInfo(jobs.Queue, id)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != asynq.TaskStateCompleted || time.Since(info.CompletedAt) > time.Minute {
			t.Fatalf("%s: %s, completed at %s", id, info.State, info.CompletedAt)
		}
		score := rdb.ZScore(ctx, completed, id).Val()
		if want := float64(info.CompletedAt.Add(jobs.Retention).Unix()); score < want-2 || score > want+2 {
			t.Fatalf("%s: completed-set score %.0f, want about %.0f", id, score, want)
		}
	}
	for _, k := range []string{"active", "lease", "pending"} {
		if n := rdb.Exists(ctx, asynqKey(jobs.Queue, k)).Val(); n != 0 {
			t.Fatalf("%s left behind", k)
		}
	}
	if got := rdb.Get(ctx, asynqKey(jobs.Queue, "processed")).Val(); got != "2" {
		t.Fatalf("processed total %q, want 2", got)
	}
}

func fieldNames(m map[string]string) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestWithCompletedAtKeepsFieldOrder(t *testing.T) {
	field := func(b []byte, num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
	}
	str := func(b []byte, num protowire.Number, v string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	base := str(str(nil, 1, "withdrawal:create"), 3, "id1")
	for _, tc := range []struct {
		name    string
		in, out []byte
	}{
		{"appended last", field(base, 12, 86400), field(field(base, 12, 86400), 13, 7)},
		{"before a later field", str(field(base, 12, 86400), 14, "g"), str(field(field(base, 12, 86400), 13, 7), 14, "g")},
		{"replaces an old value", field(field(base, 12, 86400), 13, 99999), field(field(base, 12, 86400), 13, 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withCompletedAt(tc.in, 7)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(tc.out) {
				t.Fatalf("got %x, want %x", got, tc.out)
			}
		})
	}
	if _, err := withCompletedAt([]byte{0xff}, 7); err == nil {
		t.Fatal("a broken message was accepted")
	}
}

func TestCompareRuns(t *testing.T) {
	k := func(class string, keys int, avg float64, enc string) KeyClass {
		return KeyClass{Class: class, Keys: keys, AvgBytes: avg, Encodings: map[string]int{enc: 1}}
	}
	real := []KeyClass{k("payout hash", 1000, 480, "listpack"), k("task", 1000, 480, "hashtable"), k("tiny", 1, 100, "int")}
	for _, tc := range []struct {
		name       string
		real, fast float64
		keys       []KeyClass
		want       []string
	}{
		{"equal", 1000, 1010, real, nil},
		{"used off", 1000, 1030, real, []string{"used_memory per payout"}},
		{"bytes off", 1000, 1000, []KeyClass{k("payout hash", 1000, 500, "listpack"), real[1], real[2]}, []string{"payout hash: 480 B a key real, 500 fast"}},
		{"keys off", 1000, 1000, []KeyClass{k("payout hash", 999, 480, "listpack"), real[1], real[2]}, []string{"payout hash: 1000 keys real, 999 fast"}},
		{"encoding off", 1000, 1000, []KeyClass{real[0], k("task", 1000, 480, "listpack"), real[2]}, []string{"task: encodings"}},
		{"missing", 1000, 1000, []KeyClass{real[0], real[2]}, []string{"task: only in the real run"}},
		{"small kinds ignored", 1000, 1000, []KeyClass{real[0], real[1], k("tiny", 1, 150, "embstr")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareRuns(tc.real, tc.fast, real, tc.keys)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			}
		})
	}
}

// TestCompareRunsStream: a stream's bytes depend on how concurrent entries
// interleave, so it may be StreamTolerance apart; not more.
func TestCompareRunsStream(t *testing.T) {
	audit := func(avg float64) []KeyClass {
		return []KeyClass{{Class: "audit", Keys: 1, AvgBytes: avg, Encodings: map[string]int{"stream": 1}}}
	}
	if got := compareRuns(1000, 1000, audit(525252), audit(514556)); len(got) != 0 {
		t.Errorf("stream 2%% apart: %q, want no difference", got)
	}
	if got := compareRuns(1000, 1000, audit(525252), audit(490000)); len(got) != 1 || !strings.HasPrefix(got[0], "audit: ") {
		t.Errorf("stream 7%% apart: %q, want the stream named", got)
	}
}
