package ui

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/httpstatus"
)

// Controls carries out the operator's decisions taken in the UI, through
// the same code as the command line (package operator): approve and
// discard a batch awaiting approval, pause and resume the payout queue,
// and record a pause or resume of another queue made in asynqmon. by is
// the signed-in user, recorded as who acted. A refusal matches ErrRefused
// and its message is the command's words, shown as they are.
type Controls interface {
	// Approve lets the batch go to the workers and says what was done;
	// note (optional) is recorded with the approval.
	Approve(ctx context.Context, batch, by, note string) (string, error)
	// Discard cancels every payout of the batch and says what was done.
	Discard(ctx context.Context, batch, by, note string) (string, error)
	// SwitchesQueue reports whether queue is the one SwitchQueue pauses
	// and resumes: asynqmon's pause and resume of it are answered by
	// SwitchQueue instead of asynqmon.
	SwitchesQueue(queue string) bool
	// SwitchQueue pauses (pause) or resumes the payout queue, as payout
	// pause and payout resume do, and says what was done.
	SwitchQueue(ctx context.Context, by string, pause bool) (string, error)
	// QueueChanged records in the audit trail, and notifies, that by
	// paused (or resumed) another queue in asynqmon.
	QueueChanged(ctx context.Context, queue, by string, paused bool) error
}

// ErrRefused is matched by the errors of Controls and Uploads that refuse
// what the operator asked (not awaiting approval, four-eyes, daily limit,
// a bad upload): the UI shows their message with 409. Any other error is
// logged and answered 503 without detail.
var ErrRefused = errors.New("refused")

// Refuse marks err as a refusal (it then matches ErrRefused); its message
// is shown to the operator as it is.
func Refuse(err error) error { return marked{err, ErrRefused} }

// ErrForbidden is matched by the errors of Controls and Uploads that
// refuse what the person asked because they do not hold the role it
// needs (internal/access): the UI shows their message with 403. They
// match ErrRefused too.
var ErrForbidden = errors.New("forbidden")

// Forbid marks err as a refusal for want of a role (it then matches
// ErrForbidden and ErrRefused); its message is shown as it is.
func Forbid(err error) error { return forbidden{err} }

type forbidden struct{ err error }

func (f forbidden) Error() string { return f.err.Error() }
func (f forbidden) Unwrap() error { return f.err }
func (f forbidden) Is(target error) bool {
	return target == ErrForbidden || target == ErrRefused
}

// ErrPartlyDone is matched by the errors Controls return, with the
// action's message, for an action that was done but left the rest of its
// work to the system: an approval recorded whose creates were not all
// enqueued (the workers' reconciler enqueues them). The UI shows the
// message as done (200, marked as a notice) and logs the error at warn;
// the error's own text is not shown.
var ErrPartlyDone = errors.New("done; the rest is left to the system")

// PartlyDone marks err as the rest of an action that was done (it then
// matches ErrPartlyDone).
func PartlyDone(err error) error { return marked{err, ErrPartlyDone} }

// marked is an error classified for the UI by kind.
type marked struct{ err, kind error }

func (m marked) Error() string        { return m.err.Error() }
func (m marked) Unwrap() error        { return m.err }
func (m marked) Is(target error) bool { return target == m.kind }

// batchIDPattern bounds the batch ids accepted in a path.
var batchIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// guardPost is the common front of every form the UI accepts: refused in
// read-only mode, without the feature configured, or without the CSRF
// token of the signed-in user. It returns false after answering.
func (h *batchHandlers) guardPost(w http.ResponseWriter, r *http.Request, enabled bool) bool {
	switch {
	case h.readOnly:
		h.log.Warn().Str("ip", clientIP(r)).Str("path", r.URL.Path).Msg("ui: refused a change in read-only mode")
		http.Error(w, "the UI is read-only", http.StatusForbidden)
		return false
	case !enabled:
		http.Error(w, "not configured in this UI", http.StatusNotFound)
		return false
	case !h.csrf.valid(r, r.PostFormValue(csrfField)):
		h.refuseForm(w, r)
		return false
	}
	return true
}

// refuseForm answers a form without the CSRF token of the signed-in user.
func (h *batchHandlers) refuseForm(w http.ResponseWriter, r *http.Request) {
	h.log.Warn().Str("ip", clientIP(r)).Str("path", r.URL.Path).Msg("ui: refused a form without a valid CSRF token")
	http.Error(w, "missing, expired or bad form token: reload the page and try again (a form is good for 8 hours of one sign-in)", http.StatusForbidden)
}

// batchAction is the handler of a form acting on the batch of its path:
// the guard (read-only, CSRF), the batch id, act with the signed-in user
// as who acts, and its answer under the title "VERB batch ID". A person
// whose roles do not allow action is refused first (mayTake), as in
// read-only mode.
func (h *batchHandlers) batchAction(verb string, action access.Action, act func(r *http.Request, id, by string) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.readOnly && !h.mayTake(w, r, action) {
			return
		}
		id, ok := h.formTarget(w, r, h.controls != nil, "batch id", batchIDPattern, func(r *http.Request) string { return r.PathValue("id") })
		if !ok {
			return
		}
		msg, err := act(r, id, userFrom(r.Context()))
		h.done(w, r, verb+" batch "+id, msg, err)
	}
}

// formTarget guards a form (guardPost) and returns what it acts on, read
// by value once the guard passed; one that does not match pattern is
// answered 400 ("bad " + what). It returns false after answering.
func (h *batchHandlers) formTarget(w http.ResponseWriter, r *http.Request, enabled bool, what string, pattern *regexp.Regexp, value func(*http.Request) string) (string, bool) {
	if !h.guardPost(w, r, enabled) {
		return "", false
	}
	v := value(r)
	if !pattern.MatchString(v) {
		http.Error(w, "bad "+what, http.StatusBadRequest)
		return "", false
	}
	return v, true
}

// discard discards with the form's note saying why.
func (h *batchHandlers) discard(r *http.Request, id, by string) (string, error) {
	return h.controls.Discard(r.Context(), id, by, strings.TrimSpace(r.PostFormValue("note")))
}

// doneBack is done with a link back to where the action was taken.
func (h *batchHandlers) doneBack(w http.ResponseWriter, r *http.Request, title, msg string, err error, back, backLabel string) {
	h.answer(w, r, resultPage{Title: title, Message: msg, Back: back, BackLabel: backLabel}, err)
}

// done answers an action: its message (200; marked as a notice, the
// error logged at warn, when it was partly done), its refusal (409) or,
// for any other error, 503 without detail.
func (h *batchHandlers) done(w http.ResponseWriter, r *http.Request, title, msg string, err error) {
	h.answer(w, r, resultPage{Title: title, Message: msg}, err)
}

// answer renders page for an action's outcome err.
func (h *batchHandlers) answer(w http.ResponseWriter, r *http.Request, page resultPage, err error) {
	code := http.StatusOK
	switch {
	case errors.Is(err, ErrPartlyDone):
		h.log.Warn().Err(err).Str("path", r.URL.Path).Str("user", logUser(userFrom(r.Context()))).Msg("ui: action done, its rest left to the system")
		page.Notice = true
	case errors.Is(err, ErrForbidden):
		code, page.Message, page.Refused = http.StatusForbidden, plainMessage(err.Error()), true
	case errors.Is(err, ErrRefused):
		code, page.Message, page.Refused = http.StatusConflict, plainMessage(err.Error()), true
	case err != nil:
		h.log.Error().Err(err).Str("path", r.URL.Path).Str("user", logUser(userFrom(r.Context()))).Msg("ui: action failed")
		code, page.Message, page.Refused = http.StatusServiceUnavailable, "not done: the ledger is unavailable (see the UI's log)", true
	}
	h.render(w, r, code, page)
}

// watchQueues answers asynqmon's pause and resume of the payout queue
// (POST .../api/queues/{qname}:pause or :resume) with the command of
// payout pause and payout resume (Controls.SwitchQueue): 204 as asynqmon
// answers, or its refusal's words with 409. For another queue it records,
// after asynqmon paused or resumed it successfully, the action in the
// audit trail with the signed-in user and sends the notification.
func watchQueues(next http.Handler, c Controls, h *batchHandlers) http.Handler {
	if c == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queue, paused, ok := queueAction(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if c.SwitchesQueue(queue) {
			h.switchQueue(w, r, c, paused)
			return
		}
		sw := &httpstatus.Writer{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.Code == 0 || sw.Code >= 300 {
			return
		}
		by := userFrom(r.Context())
		if err := c.QueueChanged(context.WithoutCancel(r.Context()), queue, by, paused); err != nil {
			h.log.Error().Err(err).Str("queue", queue).Str("user", logUser(by)).Msg("ui: queue action not fully recorded")
		}
	})
}

// switchQueue answers asynqmon's pause (pause) or resume of the payout
// queue with Controls.SwitchQueue.
func (h *batchHandlers) switchQueue(w http.ResponseWriter, r *http.Request, c Controls, pause bool) {
	by := userFrom(r.Context())
	msg, err := c.SwitchQueue(context.WithoutCancel(r.Context()), by, pause)
	switch {
	case errors.Is(err, ErrForbidden):
		http.Error(w, plainMessage(err.Error()), http.StatusForbidden)
		return
	case errors.Is(err, ErrRefused):
		http.Error(w, plainMessage(err.Error()), http.StatusConflict)
		return
	case errors.Is(err, ErrPartlyDone):
		h.log.Warn().Err(err).Str("user", logUser(by)).Msg("ui: queue switched, not fully recorded")
	case err != nil:
		h.log.Error().Err(err).Str("user", logUser(by)).Msg("ui: queue action failed")
		http.Error(w, "not done: the ledger is unavailable (see the UI's log)", http.StatusServiceUnavailable)
		return
	}
	h.log.Info().Str("user", logUser(by)).Msg("ui: " + msg)
	w.WriteHeader(http.StatusNoContent)
}

// queueAction recognises asynqmon's pause and resume calls.
func queueAction(r *http.Request) (queue string, paused, ok bool) {
	if r.Method != http.MethodPost {
		return "", false, false
	}
	rest, found := strings.CutPrefix(r.URL.Path, monitoringPath+"/api/queues/")
	if !found {
		return "", false, false
	}
	if q, cut := strings.CutSuffix(rest, ":pause"); cut {
		queue, paused = q, true
	} else if q, cut := strings.CutSuffix(rest, ":resume"); cut {
		queue = q
	} else {
		return "", false, false
	}
	if queue == "" || strings.Contains(queue, "/") {
		return "", false, false
	}
	return queue, paused, true
}

// internalPrefix matches the package prefixes of Go error messages
// ("ledger: ", "ui: "...), which mean nothing to the person reading.
var internalPrefix = regexp.MustCompile(`(^|[\s(])(?:ledger|ui|loader|operator|payfile|report|redis|vault|jobs|asynq): `)

// plainMessage is a refusal's message as a person reads it: without the
// internal prefixes.
func plainMessage(s string) string {
	for {
		t := internalPrefix.ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}
