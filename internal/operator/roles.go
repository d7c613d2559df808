package operator

import (
	"context"
	"fmt"

	"github.com/acme/payout/internal/access"
	"github.com/acme/payout/internal/identity"
	"github.com/acme/payout/internal/ledger"
	"github.com/acme/payout/internal/lifecycle"
)

// Every person's command checks here, and only here, that whoever acts
// holds the role its action needs (internal/access): the CLI binds the
// operating system's user mapped through the roles file (Actions.As), the
// console its signed-in person with their single sign-on groups (the
// principal in the request's context, access.NewContext), an API its
// token's principal. A refusal is ErrForbidden, in the words of
// access.Principal.Why. The role acted in goes with the command's context
// to the ledger (ledger.WithRole), which records it beside the name in
// every audit entry the command writes.

// As returns a copy of a whose commands act as p: they are refused
// unless p holds the role each needs. Actions not bound to anyone act as
// the principal of the command's context (access.FromContext), else as
// nobody, who may do nothing.
func (a *Actions) As(p access.Principal) *Actions {
	c := *a
	c.who, c.bound = p, true
	return &c
}

// principal is who a's command acts as in ctx.
func (a *Actions) principal(ctx context.Context) access.Principal {
	if a.bound {
		return a.who
	}
	p, _ := access.FromContext(ctx)
	return p
}

// allow refuses the command cmd (action act, recorded as by) unless the
// principal a acts as may take it; it returns ctx carrying the role acted
// in, for the audit trail.
func (a *Actions) allow(ctx context.Context, cmd string, act access.Action, by string) (context.Context, error) {
	return Check(ctx, a.principal(ctx), cmd, act, by)
}

// Check refuses principal p taking action act through command cmd
// (approve, load, ...) as by (the name the command records; "" not yet
// known): ErrForbidden when p does not hold the role act needs, or by
// names someone other than p. Otherwise it returns ctx carrying the role
// p acts in (ledger.WithRole). The commands of Actions call it; so do the
// console's upload (UIUploads) and the CLI's load.
func Check(ctx context.Context, p access.Principal, cmd string, act access.Action, by string) (context.Context, error) {
	role, ok := p.As(act)
	if !ok {
		return ctx, refuse(cmd, ErrForbidden, nil, p.Why(act))
	}
	if by != "" && !identity.Same(p.Name, by) {
		return ctx, refuse(cmd, ErrForbidden, nil, fmt.Sprintf("the command is recorded as %s, but %s acts", by, p.Name))
	}
	return ledger.WithRole(ctx, string(role)), nil
}

// MayRead refuses principal p reading through command cmd (status,
// history, report, review: a refusal reads "not shown: ...") unless p holds the viewer role (access.Read): the
// CLI's reads check here as its commands do, so a person the roles file
// names nowhere (without a default line) reads nothing in the CLI either,
// as the console answers them 403. A read records nothing, so no name is
// compared.
func MayRead(ctx context.Context, p access.Principal, cmd string) error {
	_, err := Check(ctx, p, cmd, access.Read, "")
	return err
}

// resolveAction is the action a resolution to is.
func resolveAction(d Resolution) access.Action {
	switch d.To {
	case lifecycle.Created:
		return access.MarkCreated
	case lifecycle.Rejected:
		return access.MarkRejected
	}
	return access.Recheck
}
