package ledger

import "context"

// The role a person acted in (internal/access: viewer, maker, approver,
// operator, admin) is recorded beside their name in every audit entry
// their command writes (field "role", AuditEntry.Role). It travels in the
// command's context (WithRole, set by internal/operator, the one place
// that checks roles), so the ledger's API stays as it was; an entry
// written without it (a worker, or any entry from before roles) has none.

type roleKey struct{}

// WithRole returns ctx carrying the role the person acts in, recorded in
// the audit entries written under it.
func WithRole(ctx context.Context, role string) context.Context {
	return context.WithValue(ctx, roleKey{}, role)
}

// roleOf is the role ctx carries ("" none).
func roleOf(ctx context.Context) string {
	r, _ := ctx.Value(roleKey{}).(string)
	return r
}

// roleSep joins the actor and the role in a transition script's actor
// argument (luaReplay splits them): a name never holds it (scrubbed).
const roleSep = "\x1f"

// actorArg is the actor argument of a transition script: the actor, and
// the role ctx carries after roleSep.
func actorArg(ctx context.Context, actor string) string {
	if r := roleOf(ctx); r != "" {
		return actor + roleSep + r
	}
	return actor
}
