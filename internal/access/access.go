// Package access says who may do what: the roles a person or an API token
// holds (viewer, maker, approver, operator, admin), the role each action
// needs, and the roles file that maps a deployment's people and groups
// (the UI's users file, the single sign-on proxy's groups header, the
// operating system's user of the CLI) to roles.
//
// Roles add up: a person may hold several, and every role reads (viewer).
// Admin administers (users, API tokens, settings) and nothing more: an
// admin who is to approve holds approver too, so that separation of
// duties is written in the roles file and not implied.
//
// The one check is [Roles.Allows]; internal/operator makes it for every
// person's command, so the CLI, the console and the API refuse alike.
package access

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Role is one role a person or a token holds.
type Role string

// The roles.
const (
	Viewer   Role = "viewer"   // reads every page and report, downloads
	Maker    Role = "maker"    // uploads and loads files, creates batches
	Approver Role = "approver" // approves and discards batches awaiting approval
	Operator Role = "operator" // recheck, mark created/rejected, cancel, release, pause/resume, redeliver, reconcile, archive
	Admin    Role = "admin"    // users, API tokens, settings
)

// All is every role, in the order people read them.
var All = []Role{Viewer, Maker, Approver, Operator, Admin}

// Action is what a command does, as far as roles are concerned.
type Action string

// The actions. Each needs one role (Needs).
const (
	Read         Action = "read"          // pages, status, search, downloads
	Load         Action = "load"          // upload or load a file, create a batch
	Approve      Action = "approve"       // approve a batch awaiting approval
	Discard      Action = "discard"       // discard a batch awaiting approval
	Cancel       Action = "cancel"        // cancel a payout not yet sent
	Recheck      Action = "recheck"       // ask the PSP again about a payout in review
	MarkCreated  Action = "mark-created"  // resolve a payout in review as created
	MarkRejected Action = "mark-rejected" // resolve a payout in review as rejected
	Release      Action = "release"       // release a payout held for a person
	Pause        Action = "pause"         // pause the payout queue
	Resume       Action = "resume"        // resume the payout queue
	Redeliver    Action = "redeliver"     // deliver webhook events again
	Reconcile    Action = "reconcile"     // restore the lost tasks of open payouts (payout reconcile)
	Archive      Action = "archive"       // move final batches out of Redis (payout archive)
	Administer   Action = "administer"    // users, API tokens, settings
)

// needs is the one table of which role each action needs.
var needs = map[Action]Role{
	Read:         Viewer,
	Load:         Maker,
	Approve:      Approver,
	Discard:      Approver,
	Cancel:       Operator,
	Recheck:      Operator,
	MarkCreated:  Operator,
	MarkRejected: Operator,
	Release:      Operator,
	Pause:        Operator,
	Resume:       Operator,
	Redeliver:    Operator,
	Reconcile:    Operator,
	Archive:      Operator,
	Administer:   Admin,
}

// Needs returns the role action needs (false for an action this package
// does not know, which nobody may take).
func Needs(a Action) (Role, bool) {
	r, ok := needs[a]
	return r, ok
}

// Roles is a set of roles. The zero value holds none: it may not even
// read.
type Roles uint8

func bit(r Role) Roles {
	for i, x := range All {
		if x == r {
			return 1 << i
		}
	}
	return 0
}

// Of returns the set holding rs; every role but none reads.
func Of(rs ...Role) Roles {
	var s Roles
	for _, r := range rs {
		s |= bit(r)
	}
	if s != 0 {
		s |= bit(Viewer)
	}
	return s
}

// Everyone holds every role but admin: a deployment without a roles file,
// where whoever signs in may do everything but administer (as before
// roles existed).
var Everyone = Of(Viewer, Maker, Approver, Operator)

// Has says whether r is in the set (viewer for any non-empty set).
func (s Roles) Has(r Role) bool { b := bit(r); return b != 0 && s&b == b }

// Allows says whether the set may take action a.
func (s Roles) Allows(a Action) bool {
	r, ok := needs[a]
	return ok && s.Has(r)
}

// List returns the roles of the set in the order of All.
func (s Roles) List() []Role {
	var out []Role
	for _, r := range All {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String is the roles comma-separated ("viewer,maker"), "none" for none.
func (s Roles) String() string {
	l := s.List()
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, len(l))
	for i, r := range l {
		parts[i] = string(r)
	}
	return strings.Join(parts, ",")
}

// ErrUnknownRole is matched by the error of a role name this package does
// not know.
var ErrUnknownRole = errors.New("unknown role")

// ParseRole reads one role name (case and surrounding space ignored).
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if bit(r) == 0 {
		return "", fmt.Errorf("%w %q (the roles are %s)", ErrUnknownRole, strings.TrimSpace(s), names())
	}
	return r, nil
}

// ParseRoles reads a comma-separated list of role names.
func ParseRoles(s string) (Roles, error) {
	var set Roles
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		r, err := ParseRole(f)
		if err != nil {
			return 0, err
		}
		set |= Of(r)
	}
	return set, nil
}

func names() string {
	n := make([]string, len(All))
	for i, r := range All {
		n[i] = string(r)
	}
	sort.Strings(n)
	return strings.Join(n, ", ")
}

// Principal is who acts and in which roles: a person (canonical name, see
// internal/identity), a system identity or an API token's identity.
type Principal struct {
	Name  string
	Roles Roles
}

// As returns the role p acts in when taking action a, and whether p may
// take it at all: the audit trail records the role beside the name.
func (p Principal) As(a Action) (Role, bool) {
	r, ok := needs[a]
	return r, ok && p.Roles.Has(r)
}

// gerunds name the actions in a refusal's words ("approving needs ...").
var gerunds = map[Action]string{
	Read: "reading", Load: "uploading or loading a file", Approve: "approving", Discard: "discarding",
	Cancel: "cancelling a payout", Recheck: "rechecking a payout", MarkCreated: "marking a payout created",
	MarkRejected: "marking a payout rejected", Release: "releasing a payout", Pause: "pausing the queue",
	Resume: "resuming the queue", Redeliver: "redelivering webhook events",
	Reconcile: "restoring the tasks of open payouts", Archive: "archiving batches", Administer: "administering",
}

// Why says why p may not take action a ("approving needs the approver
// role; alice holds viewer"), "" when p may. The CLI, the console and
// the API refuse with these words. A principal without a name is spoken
// to ("... you hold viewer"): the console shows those words in place of
// a button its signed-in person may not use.
func (p Principal) Why(a Action) string {
	if p.Roles.Allows(a) {
		return ""
	}
	what, ok := gerunds[a]
	r, known := needs[a]
	if !ok || !known {
		return fmt.Sprintf("%q is not an action anyone may take", string(a))
	}
	if p.Name == "" {
		return fmt.Sprintf("%s needs the %s role; you hold %s", what, r, p.Roles)
	}
	return fmt.Sprintf("%s needs the %s role; %s holds %s", what, r, p.Name, p.Roles)
}

type principalKey struct{}

// NewContext returns ctx carrying p, the principal a request acts as (the
// console's signed-in person, an API token's identity).
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries (NewContext), and whether
// it carries one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
