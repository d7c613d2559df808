package operator

import (
	"context"

	"github.com/acme/payout/internal/access"
)

// SeedReview is seedReview for the external tests (commands_test.go).
var SeedReview = seedReview

// asPerson is ctx carrying name as the principal of a deployment without
// a roles file (access.Everyone), as the console's request does.
func asPerson(ctx context.Context, name string) context.Context {
	return access.NewContext(ctx, access.Principal{Name: name, Roles: access.Everyone})
}

// everyone is name holding every role but admin.
func everyone(name string) access.Principal {
	return access.Principal{Name: name, Roles: access.Everyone}
}
