package ui

import (
	"context"
	"fmt"
	"net/http"

	"github.com/acme/payout/internal/access"
	"github.com/rs/zerolog"
)

// roleMap makes the signed-in person of a request an access.Principal:
// their roles from the roles file (Config.Roles; access.Everyone without
// one), every role but viewer dropped in read-only mode. A person who
// may not even read is answered 403 with the words saying so.
type roleMap struct {
	m        *access.Map
	readOnly bool
	log      zerolog.Logger
}

// principal is name's principal, with their single sign-on groups.
func (rm roleMap) principal(name string, groups []string) access.Principal {
	roles := access.Everyone
	if rm.m != nil {
		roles = rm.m.For(name, groups)
	}
	if rm.readOnly {
		roles &= access.Of(access.Viewer)
	}
	return access.Principal{Name: name, Roles: roles}
}

// serve passes r to next as signed in by user, a member of groups: the
// user's name (userFrom) and principal (access.FromContext) in its
// context.
func (rm roleMap) serve(next http.Handler, w http.ResponseWriter, r *http.Request, user string, groups []string) {
	p := rm.principal(user, groups)
	if !p.Roles.Allows(access.Read) {
		rm.log.Warn().Str("user", logUser(user)).Strs("groups", groups).Str("path", r.URL.Path).
			Msg("ui: refused a person who holds no role")
		http.Error(w, "not shown: "+p.Why(access.Read)+" (the roles file names neither them nor their groups)", http.StatusForbidden)
		return
	}
	ctx := context.WithValue(r.Context(), userKey{}, user)
	next.ServeHTTP(w, r.WithContext(access.NewContext(ctx, p)))
}

// whyNot says, to the signed-in person of r, why they may not take action
// act ("approving needs the approver role; you hold viewer"), "" when
// they may: the words the console shows in place of a button.
func whyNot(r *http.Request, act access.Action) string {
	p := principalFrom(r.Context())
	if p.Roles.Allows(act) {
		return ""
	}
	return access.Principal{Roles: p.Roles}.Why(act)
}

// principalFrom is the signed-in person of the request as a principal
// (nobody, who may do nothing, outside a signed-in request).
func principalFrom(ctx context.Context) access.Principal {
	p, _ := access.FromContext(ctx)
	return p
}

// proxyGroups is the groups the authenticating proxy lists for the
// person it signed in (ProxyGroupsHeader, comma-separated; several
// header lines add up). Called only once proxyUser believed the request.
func (a *authenticator) proxyGroups(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values(a.groupsHeader) {
		out = append(out, access.SplitGroups(v)...)
	}
	return out
}

// decisionActions are the payout decisions of the console as actions (an
// unknown one is the operator's too: Controls refuse it).
var decisionActions = map[string]access.Action{DecideCancel: access.Cancel, DecideRecheck: access.Recheck,
	DecideCreated: access.MarkCreated, DecideRejected: access.MarkRejected, "": access.Recheck}

// mayTake answers 403 with the words of access.Principal.Why, and returns
// false, when the signed-in person may not take action act: the form of
// a button the page did not show them, sent anyway. The command behind
// it refuses alike (internal/operator checks every command).
func (h *batchHandlers) mayTake(w http.ResponseWriter, r *http.Request, act access.Action) bool {
	p := principalFrom(r.Context())
	if act == "" {
		act = access.Recheck // an unknown decision: the operator's, refused by the Controls
	}
	why := p.Why(act)
	if why == "" {
		return true
	}
	h.log.Warn().Str("user", logUser(p.Name)).Str("path", r.URL.Path).Str("action", string(act)).
		Msg("ui: refused an action the person's roles do not allow")
	h.render(w, r, http.StatusForbidden, resultPage{Title: "Not allowed", Message: "not done: " + why, Refused: true})
	return false
}

// roleGuard refuses every change made in the Asynq web UI (anything but
// GET and HEAD under /monitoring/: delete, run or archive a task, pause a
// queue) to a person without the operator role, the role of pause and
// resume: 403 with the words saying so.
func roleGuard(next http.Handler, log zerolog.Logger) http.Handler {
	role, _ := access.Needs(access.Pause)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalFrom(r.Context())
		if r.Method == http.MethodGet || r.Method == http.MethodHead || p.Roles.Allows(access.Pause) {
			next.ServeHTTP(w, r)
			return
		}
		log.Warn().Str("user", logUser(p.Name)).Str("method", r.Method).Str("path", r.URL.Path).
			Msg("ui: refused a change in the Asynq web UI to a person without the operator role")
		http.Error(w, fmt.Sprintf("not done: changing tasks or queues in the Asynq web UI needs the %s role; %s holds %s", role, p.Name, p.Roles),
			http.StatusForbidden)
	})
}
