package worker

import (
	"fmt"
	"sync"

	"github.com/hibiken/asynq"
)

// Asynq's processor takes tasks off the queue one at a time: its loop
// sends a dequeue to Redis, waits for the answer, hands the task to a
// handler goroutine and only then sends the next dequeue (processor.exec).
// However large Concurrency is, one process starts at most one task per
// round trip to Redis, and that round trip grows with everything else the
// process and Redis do: on the 2-core test machine the payout worker was
// held to about half the bare handler's rate with most of its slots idle
// (bench/README.md, "Dequeue lanes").
//
// A lane is one more Asynq server on the same queue in this process, with
// its own dequeue loop and a share of Concurrency. Asynq supports several
// servers on one queue (in one process or many): every dequeue is one
// atomic script, so a task goes to one lane only, and each lane registers
// its own workers and leases, which the reconciler reads as it reads those
// of any other worker process. Nothing else changes: the same handlers,
// the same ledger compare-and-set before and after every request.

// LaneShares splits concurrency between lanes (at most concurrency of
// them, at least one): every lane gets the same share, the first ones one
// more until the total is concurrency. The bench's bare handler splits its
// concurrency the same way when it is given lanes.
func LaneShares(concurrency, lanes int) []int {
	lanes = max(1, min(lanes, concurrency))
	shares := make([]int, lanes)
	for i := range shares {
		shares[i] = concurrency / lanes
		if i < concurrency%lanes {
			shares[i]++
		}
	}
	return shares
}

// lanes are the Asynq servers of one worker process.
type lanes []*asynq.Server

// startLanes starts the worker's lanes on the payout queue. On an error
// the lanes already started are shut down.
func (w *Worker) startLanes() (lanes, error) {
	var ls lanes
	shares := LaneShares(w.cfg.Concurrency, w.cfg.Lanes)
	for _, share := range shares {
		cfg := w.serverConfig()
		cfg.Concurrency = share
		srv := asynq.NewServerFromRedisClient(w.rdb, cfg)
		if err := srv.Start(w.Mux()); err != nil {
			ls.shutdown()
			return nil, fmt.Errorf("worker: start asynq server (lane %d of %d): %w", len(ls)+1, len(shares), err)
		}
		ls = append(ls, srv)
	}
	return ls, nil
}

// shutdown stops every lane from taking new tasks first, then waits for
// their tasks in flight (each lane for at most ShutdownTimeout, all at
// once): no lane goes on dequeuing while another one winds down.
func (ls lanes) shutdown() {
	for _, srv := range ls {
		srv.Stop()
	}
	var wg sync.WaitGroup
	for _, srv := range ls {
		wg.Go(srv.Shutdown)
	}
	wg.Wait()
}
