package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/acme/payout/internal/psp"
)

// A refusal of our credentials (psp.AuthFault: 401 or 403, 404 or 405 on
// create, a refused TLS handshake) used to pause the whole queue at once,
// so one worker with a stale token stopped every payout. Now the worker
// first rechecks: it reads its token again from where it came from and
// runs the start-up check (psp.Client.RecheckAPI, `payout worker --check`).
//
//   - The recheck accepts the token, and the answer was 401 or 403: the
//     credentials work, this one request was refused (a token rotated
//     meanwhile, a PSP rule about this request). It counts as a request
//     without an answer: a create goes back to queued with a try counted
//     (--max-create-retries), a status query counts a fault.
//   - The recheck gets no answer: nothing is decided, the task comes back
//     later, the payout as it was.
//   - Otherwise (the token refused again, an answer not from the PSP, or
//     a 404/405 on create where the status path works) the worker reports
//     the refusal in Redis. Two distinct workers reporting within
//     AuthConfirmWindow confirm it: the PSP refuses the fleet's
//     credentials, and the queue is paused as before. Unconfirmed, the
//     fault may be this worker's alone (a stale token file, another
//     --psp-url): this worker stops itself, leaving the queue and the
//     payout as they were for the others.
//
// A lone worker cannot tell its own stale token from a token the PSP
// revoked for everyone, so it stops itself; started again, its start-up
// check refuses with the PSP's answer (docs/operations.md, "Pause and
// resume").

// recheckAPI is what the worker's PSP client offers to recheck its
// credentials (psp.Client does).
type recheckAPI interface {
	RecheckAPI(ctx context.Context) psp.APICheck
}

// authVerdict is what a refusal of our credentials turned out to be.
type authVerdict int

const (
	// authRequest: the recheck accepted the token; this request was
	// refused, the credentials were not.
	authRequest authVerdict = iota
	// authHeld: the task comes back later, nothing decided (the recheck
	// got no answer, or the queue was paused, or this worker stopped).
	authHeld
)

// authFault rechecks the credentials after res (an AuthFault answer to a
// request of kind what) and, unless the recheck shows the credentials
// work (authRequest, nil error), returns the error the handler returns:
// a deferral, a pause of the queue (confirmed by a second worker) or this
// worker's own stop.
func (w *Worker) authFault(ctx context.Context, res psp.Result, what string) (authVerdict, error) {
	reason := fmt.Sprintf("PSP refused our credentials or path on %s (HTTP %d): %s", what, res.HTTPStatus, res.Message)
	log := w.log.With().Str("op", what).Int("http", res.HTTPStatus).Logger()
	if rc, ok := w.psp.(recheckAPI); ok {
		check := rc.RecheckAPI(context.WithoutCancel(ctx))
		switch {
		case check.Verdict == psp.APIAccepted && (res.HTTPStatus == 401 || res.HTTPStatus == 403):
			log.Warn().Str("reason", res.Message).Str("recheck", check.Message).
				Msg("PSP refused one request, but a recheck with a fresh read of the token was accepted: counted as a request without an answer; the queue goes on")
			return authRequest, nil
		case check.Verdict == psp.APIUnreachable:
			w.metrics.deferred.WithLabelValues("auth_recheck").Inc()
			log.Warn().Str("reason", res.Message).Str("recheck", check.Message).
				Msg("PSP refused our credentials and the recheck got no answer: nothing decided; the task comes back later")
			return authHeld, &deferral{reason: reason + "; recheck: " + check.Message, after: w.cfg.PauseRetry}
		}
		reason += "; recheck with a fresh read of the token: " + check.Message
	}
	n, err := reportAuthFault(ctx, w.ledger.Redis(), w.ledger.Actor(), w.cfg.AuthConfirmWindow)
	if err != nil {
		return authHeld, err
	}
	if n >= 2 {
		return authHeld, w.pause(ctx, fmt.Sprintf("%s; confirmed by %d workers within %s", reason, n, w.cfg.AuthConfirmWindow))
	}
	return authHeld, w.stopSelf(fmt.Sprintf("%s; no other worker confirmed it within %s, so the fault may be this worker's alone (its token or --psp-url): the queue goes on without it",
		reason, w.cfg.AuthConfirmWindow))
}

// defaultAuthConfirmWindow is Config.AuthConfirmWindow's default.
const defaultAuthConfirmWindow = 10 * time.Minute
