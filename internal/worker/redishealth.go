package worker

import (
	"context"
	"time"

	"github.com/rs/zerolog"
)

// redisPingEvery is how often a worker asks Redis whether it answers, for
// the one log line on each change (Asynq's own error lines are sampled).
const redisPingEvery = 2 * time.Second

// redisHealth turns the answers of periodic PINGs into one log line when
// Redis stops answering and one when it answers again, so that on-call
// reads "Redis unreachable since …" and "Redis reachable again after …"
// instead of counting Asynq's error lines. The zero value holds "reachable".
type redisHealth struct {
	log       zerolog.Logger
	downSince time.Time // zero while Redis answers
	lastErr   string
}

// observe records one PING's outcome at time at and logs a change.
func (h *redisHealth) observe(err error, at time.Time) {
	switch {
	case err != nil && h.downSince.IsZero():
		h.downSince, h.lastErr = at, err.Error()
		h.log.Error().Err(err).Time("since", at).
			Msg("Redis unreachable: no task is taken and no request is sent until it answers; nothing is lost")
	case err != nil:
		h.lastErr = err.Error()
	case !h.downSince.IsZero():
		h.log.Warn().Time("since", h.downSince).Dur("outage", at.Sub(h.downSince)).Str("last_error", h.lastErr).
			Msg("Redis reachable again")
		h.downSince, h.lastErr = time.Time{}, ""
	}
}

// watch pings Redis every redisPingEvery until ctx is done.
func (h *redisHealth) watch(ctx context.Context, ping func(context.Context) error) {
	t := time.NewTicker(redisPingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, redisPingEvery)
			err := ping(pctx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			h.observe(err, time.Now())
		}
	}
}
