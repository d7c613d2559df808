package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acme/payout/internal/loader"
	"github.com/acme/payout/internal/psp"
	"github.com/acme/payout/internal/queue"
	"github.com/acme/payout/internal/worker"
	"github.com/acme/payout/jobs"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The bare baselines: what the loader and the worker would cost if they did
// only their Asynq and HTTP work, with no file parsing, validation, ledger,
// encryption or classification.

// LoaderEnqueueWorkers is the loader's default number of concurrent
// enqueues (loader.Options.EnqueueWorkers); the bare enqueue uses the same.
const LoaderEnqueueWorkers = loader.DefaultEnqueueWorkers

// LoaderMaxCreateRetries is the retry budget `payout load` gives each
// create task by default (--max-create-retries).
const LoaderMaxCreateRetries = 10

// BareEnqueue enqueues the create tasks of rows 1..n of the generated file
// with the given concurrency, exactly as the loader builds them (payload,
// task ID, queue, retention, retry budget), and nothing else. With
// pipelined, the Asynq client runs on go-redis autopipelining, as `payout
// load` does by default.
func BareEnqueue(ctx context.Context, rdb redis.UniversalClient, batch string, n, concurrency int, pipelined bool) error {
	var conn redis.UniversalClient = rdb
	if pipelined {
		ap, err := rdb.AutoPipeline()
		if err != nil {
			return err
		}
		conn = ap
	}
	client := asynq.NewClientFromRedisClient(conn)
	return parallel(ctx, n, concurrency, func(ctx context.Context, i int) error {
		r := RowAt(i)
		t, err := jobs.NewCreateTask(jobs.CreatePayload{
			Batch: batch, ExternalID: r.ExternalID, Attempt: 1, Amount: r.Amount, Destination: r.Destination(),
		})
		if err != nil {
			return err
		}
		return enqueueOnce(ctx, client, queue.Asynq(t, time.Now()))
	})
}

// enqueueOnce enqueues t; a task holding its ID already counts as done
// (queue.Queue.Add, without the step).
func enqueueOnce(ctx context.Context, c *asynq.Client, t *asynq.Task) error {
	if _, err := c.EnqueueContext(ctx, t); err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("bench: enqueue %s: %w", t.Type(), err)
	}
	return nil
}

// BareTaskType is the task type of the bare worker baseline.
const BareTaskType = "bench:withdrawal-post"

// PreloadBareTasks enqueues n bare worker tasks (rows 1..n) on the payout
// queue with the options of a create task; each payload is the JSON body
// to POST.
func PreloadBareTasks(ctx context.Context, rdb redis.UniversalClient, n, concurrency int) error {
	client := asynq.NewClientFromRedisClient(rdb)
	return parallel(ctx, n, concurrency, func(ctx context.Context, i int) error {
		r := RowAt(i)
		t := asynq.NewTask(BareTaskType, r.Body(),
			asynq.TaskID("bench:"+r.ExternalID), asynq.Queue(jobs.Queue),
			asynq.MaxRetry(LoaderMaxCreateRetries), asynq.Retention(jobs.Retention))
		return enqueueOnce(ctx, client, t)
	})
}

// BareWorkerConfig configures the bare worker baseline.
type BareWorkerConfig struct {
	PSPURL      string // base URL of the PSP
	Token       string // bearer token
	Concurrency int
	// Lanes > 1 runs that many Asynq servers sharing Concurrency, split
	// as payout worker splits it (worker.LaneShares); 0 or 1: one.
	Lanes  int
	Expect int    // call Done after this many successful POSTs
	Done   func() // may be nil
}

// errNot200 makes Asynq retry a task whose POST did not answer 200.
var errNot200 = errors.New("bench: PSP did not answer 200")

// NewBareHandler returns the bare task handler: one POST of the payload to
// the PSP's withdrawal create path with a keep-alive pool the size of the
// concurrency (as the PSP client), the answer read and dropped, no ledger.
func NewBareHandler(cfg BareWorkerConfig) (asynq.Handler, *http.Client) {
	hc := &http.Client{
		Timeout: psp.DefaultTimeout,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        cfg.Concurrency,
			MaxIdleConnsPerHost: cfg.Concurrency,
			MaxConnsPerHost:     cfg.Concurrency,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	url := cfg.PSPURL + psp.PathWithdrawalCreate
	var ok atomic.Int64
	var once sync.Once
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(t.Payload()))
		if err != nil {
			return fmt.Errorf("bench: build request: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("bench: post: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%w: HTTP %d", errNot200, resp.StatusCode)
		}
		if ok.Add(1) == int64(cfg.Expect) && cfg.Done != nil {
			once.Do(cfg.Done)
		}
		return nil
	})
	return h, hc
}

// RunBareWorker serves the payout queue with the bare handler until ctx is
// done.
func RunBareWorker(ctx context.Context, rdb redis.UniversalClient, cfg BareWorkerConfig) error {
	h, hc := NewBareHandler(cfg)
	defer hc.CloseIdleConnections()
	var servers []*asynq.Server
	defer func() {
		for _, srv := range servers {
			srv.Shutdown()
		}
	}()
	for _, share := range worker.LaneShares(cfg.Concurrency, cfg.Lanes) {
		srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
			Concurrency:              share,
			Queues:                   map[string]int{jobs.Queue: 1},
			TaskCheckInterval:        time.Second,
			DelayedTaskCheckInterval: time.Second,
			LogLevel:                 asynq.WarnLevel,
		})
		if err := srv.Start(h); err != nil {
			return fmt.Errorf("bench: start bare worker: %w", err)
		}
		servers = append(servers, srv)
	}
	<-ctx.Done()
	return nil
}

// parallel calls fn for i = 1..n from concurrency goroutines and returns
// the first error.
func parallel(ctx context.Context, n, concurrency int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(concurrency, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return context.Cause(ctx)
}
