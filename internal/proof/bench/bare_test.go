package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/vault"
	"github.com/acme/payout/jobs"
	"github.com/alicebob/miniredis/v2"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

func miniRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

type task struct{ id, typ, payload string }

func pendingTasks(t *testing.T, rdb redis.UniversalClient) []task {
	t.Helper()
	infos, err := asynq.NewInspectorFromRedisClient(rdb).ListPendingTasks(jobs.Queue, asynq.PageSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	var out []task
	for _, ti := range infos {
		out = append(out, task{ti.ID, ti.Type, string(ti.Payload)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// The bare enqueue baseline enqueues exactly the tasks `payout load` does
// for the same file: same IDs, types and payloads.
func TestBareEnqueueMatchesTheLoader(t *testing.T) {
	const n = 40
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.csv")
	if err := WriteFile(path, n); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := loader.BatchID(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	rdb := miniRedis(t)
	res, err := loader.New(ledger.New(rdb), queue.New(rdb), vault.Ephemeral(), zerolog.Nop()).
		LoadFile(ctx, path, loader.Options{})
	if err != nil || res.Enqueued != n || res.Batch != batch {
		t.Fatalf("LoadFile: %+v, %v", res, err)
	}
	want := pendingTasks(t, rdb)

	for _, pipelined := range []bool{false, true} {
		bare := miniRedis(t)
		if err := BareEnqueue(ctx, bare, batch, n, 4, pipelined); err != nil {
			t.Fatal(err)
		}
		got := pendingTasks(t, bare)
		if len(got) != n || len(want) != n {
			t.Fatalf("pipelined=%v: bare enqueued %d tasks, loader %d, want %d", pipelined, len(got), len(want), n)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("pipelined=%v: task %d:\n bare   %+v\n loader %+v", pipelined, i, got[i], want[i])
			}
		}
	}
}

// The bare worker sends every task's body once, with the PSP client's
// headers, and says when it is done.
func TestBareWorkerPostsEachBodyOnce(t *testing.T) {
	const n = 25
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	bodies := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ok := r.Method == http.MethodPost && r.URL.Path == psp.PathWithdrawalCreate &&
			r.Header.Get("Authorization") == "Bearer tok" && r.Header.Get("Content-Type") == "application/json"
		mu.Lock()
		if ok {
			bodies[string(b)]++
		}
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"status":"Created"}`)
	}))
	defer srv.Close()

	rdb := miniRedis(t)
	if err := PreloadBareTasks(ctx, rdb, n, 4); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	wctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- RunBareWorker(wctx, rdb, BareWorkerConfig{PSPURL: srv.URL, Token: "tok", Concurrency: 5, Expect: n,
			Done: func() { close(done) }})
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("bare worker did not report done")
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != n {
		t.Fatalf("%d distinct bodies, want %d", len(bodies), n)
	}
	for i := 1; i <= n; i++ {
		if c := bodies[string(RowAt(i).Body())]; c != 1 {
			t.Errorf("row %d posted %d times", i, c)
		}
	}
}

func TestParallelStopsAtTheFirstError(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]bool{}
	err := parallel(context.Background(), 1000, 4, func(ctx context.Context, i int) error {
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		switch {
		case i == 10:
			return errNot200
		case i > 10:
			<-ctx.Done() // a call after the error ends only when parallel cancels
		}
		return nil
	})
	if err != errNot200 {
		t.Fatalf("err %v, want errNot200", err)
	}
	// Each of the 4 goroutines may have taken one call past the failing
	// one before the cancel; none takes another after it.
	if len(seen) > 10+4 {
		t.Fatalf("parallel went on after an error: %d calls", len(seen))
	}
	seen = map[int]bool{}
	if err := parallel(context.Background(), 100, 3, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i] = true
		mu.Unlock()
		return nil
	}); err != nil || len(seen) != 100 || seen[0] || !seen[100] {
		t.Fatalf("parallel 1..100: %v, saw %d", err, len(seen))
	}
}
