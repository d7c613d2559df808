package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
	"github.com/acme/payout/internal/operator"
)

// The actions: each is the internal/operator command the CLI and the
// console run, taken by the token's identity ("token:NAME") bound to the
// command (operator.Actions.As), which checks the token's role as it
// checks a person's; its *Refusal becomes a problem of its kind
// (problem.go). auth checked the role before the body was read.

// actions is the operator's commands acting as p.
func (s *Server) actions(p access.Principal) *operator.Actions { return s.cfg.Actions.As(p) }

// noteBody is an action's body.
type noteBody struct {
	Note       string `json:"note"`
	PSPOrderID string `json:"pspOrderId"`
	PSPStatus  string `json:"pspStatus"`
}

// readNote decodes an action's body (an empty body is no note); mark
// says whether the order fields are allowed.
func readNote(r *http.Request, mark bool) (noteBody, error) {
	var n noteBody
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&n)
	if errors.Is(err, io.EOF) {
		return n, nil
	}
	if err != nil {
		return n, badRequest("the body: %v (want {\"note\": \"...\"})", err)
	}
	if !mark && (n.PSPOrderID != "" || n.PSPStatus != "") {
		return n, badRequest("pspOrderId and pspStatus belong to mark-created only")
	}
	return n, nil
}

// done answers an operator command's outcome: its words, or its refusal.
func done(w http.ResponseWriter, words string, err error) error {
	switch {
	case err == nil:
		return writeJSON(w, http.StatusOK, Done{Message: words, Complete: true})
	case errors.Is(err, operator.ErrNotEnqueued), errors.Is(err, operator.ErrNextNotEnqueued):
		return writeJSON(w, http.StatusOK, Done{Message: words, Complete: false})
	}
	return err
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	n, err := readNote(r, false)
	if err != nil {
		return err
	}
	res, err := s.actions(p).Approve(r.Context(), r.PathValue("batchId"),
		ledger.Approval{By: p.Name, FourEyes: s.cfg.FourEyes, DailyLimit: s.cfg.DailyLimit, Note: n.Note})
	return done(w, res.Words(), err)
}

func (s *Server) discard(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	n, err := readNote(r, false)
	if err != nil {
		return err
	}
	res, err := s.actions(p).Discard(r.Context(), r.PathValue("batchId"), p.Name, n.Note)
	return done(w, res.Words(), err)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	n, err := readNote(r, false)
	if err != nil {
		return err
	}
	res, err := s.actions(p).Cancel(r.Context(), r.PathValue("batchId"), r.PathValue("externalId"), p.Name, n.Note)
	return done(w, res.Words(), err)
}

// resolve is recheck, mark-created and mark-rejected: operator.Resolve.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, p access.Principal, to lifecycle.State) error {
	n, err := readNote(r, to == lifecycle.Created)
	if err != nil {
		return err
	}
	who := ledger.Resolution{By: p.Name, Note: n.Note}
	if to == lifecycle.Created {
		who.OutcomeWindow = s.cfg.OutcomeWindow
	}
	res, err := s.actions(p).Resolve(r.Context(), s.cfg.PSP, r.PathValue("batchId"), r.PathValue("externalId"),
		operator.Resolution{To: to, OrderID: n.PSPOrderID, PSPStatus: n.PSPStatus, Who: who, FourEyes: s.cfg.FourEyes})
	return done(w, res.Words(), err)
}

func (s *Server) recheck(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	return s.resolve(w, r, p, lifecycle.Checking)
}

func (s *Server) markCreated(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	return s.resolve(w, r, p, lifecycle.Created)
}

func (s *Server) markRejected(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	return s.resolve(w, r, p, lifecycle.Rejected)
}

// switchQueue is pause and resume: operator.Pause, operator.Resume.
func (s *Server) switchQueue(w http.ResponseWriter, r *http.Request, p access.Principal, pause bool) error {
	n, err := readNote(r, false)
	if err != nil {
		return err
	}
	q := operator.QueueSwitch{By: p.Name, Note: strings.TrimSpace(n.Note), How: "the API"}
	var res operator.SwitchedQueue
	if pause {
		res, err = s.actions(p).Pause(r.Context(), q)
	} else {
		res, err = s.actions(p).Resume(r.Context(), q)
	}
	if err == nil && res.Unrecorded != nil {
		s.cfg.Log.Error().Err(res.Unrecorded).Msg("api: queue switched, not recorded")
	}
	return done(w, res.Words(), err)
}

func (s *Server) pause(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	return s.switchQueue(w, r, p, true)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request, p access.Principal) error {
	return s.switchQueue(w, r, p, false)
}
