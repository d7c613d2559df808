package api

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger/keys"
	"github.com/go-redis/redis_rate/v10"
)

// auth authenticates a request by its bearer token (and nothing else: a
// console session cookie or a Basic login is never looked at), applies
// the token's rate limit and checks its role may take action, then runs
// h as the token's principal. A handler's error is answered as a problem.
func (s *Server) auth(action access.Action, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, prob := s.principal(r)
		if prob == nil {
			prob = s.limit(r, p)
		}
		if prob == nil && !p.Roles.Allows(action) {
			need, _ := access.Needs(action)
			prob = newProblem(KindForbidden, "the token "+p.Name+" holds "+p.Roles.String()+"; "+string(action)+" needs the role "+string(need))
		}
		if prob != nil {
			if prob.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="payout api"`)
			}
			prob.write(w)
			return
		}
		if err := h(w, r, p); err != nil {
			s.fail(w, r, err)
		}
	})
}

// principal is the token's principal, or the problem of its absence.
func (s *Server) principal(r *http.Request) (access.Principal, *Problem) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return access.Principal{}, newProblem(KindUnauthorized, "send an API token: Authorization: Bearer pyt_... (payout token create)")
	}
	t, err := s.tokens.Lookup(r.Context(), strings.TrimSpace(secret))
	if errors.Is(err, ErrTokenUnknown) {
		return access.Principal{}, newProblem(KindUnauthorized, "unknown or revoked API token")
	}
	if err != nil {
		s.cfg.Log.Error().Err(err).Msg("api: token lookup")
		return access.Principal{}, newProblem(KindInternal, "the token could not be checked")
	}
	return t.Principal(), nil
}

// limit is the token's request rate (GCRA in Redis, shared by every API
// process): nil, or a 429 with Retry-After.
func (s *Server) limit(r *http.Request, p access.Principal) *Problem {
	res, err := s.limiter.Allow(r.Context(), keys.APIRate(p.Name), redis_rate.PerSecond(s.cfg.Rate))
	if err != nil {
		s.cfg.Log.Error().Err(err).Msg("api: rate limit")
		return newProblem(KindInternal, "the rate limit could not be checked")
	}
	if res.Allowed > 0 {
		return nil
	}
	prob := newProblem(KindRateLimited, "at most "+itoa(s.cfg.Rate)+" requests a second per token")
	prob.retryAfter = max(1, int(math.Ceil(res.RetryAfter.Seconds())))
	return prob
}

// fail answers err: a *Problem as it is, an operator refusal by its
// kind, anything else as a 500 (logged, not shown).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var prob *Problem
	if errors.As(err, &prob) {
		prob.write(w)
		return
	}
	if p, ok := refusalProblem(err); ok {
		p.write(w)
		return
	}
	s.cfg.Log.Error().Err(err).Str("path", r.URL.Path).Msg("api: request failed")
	newProblem(KindInternal, "the request failed; the server's log says why").write(w)
}

func itoa(n int) string { return strconv.Itoa(n) }
