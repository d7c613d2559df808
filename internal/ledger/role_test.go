package ledger

import (
	"context"
	"strings"
	"testing"
)

// TestAuditRecordsTheRoleActedIn: an entry written under WithRole carries
// the role beside the actor (a payout's move, a batch's approval, the
// global trail); an entry without one (a worker's, or one from before
// roles) reads with no role, and its actor unchanged.
func TestAuditRecordsTheRoleActedIn(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLedger(t)
	seed(t, l, "b", 2)
	if _, err := l.Cancel(WithRole(ctx, "operator"), "b", "E1", "carol", "duplicate"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Cancel(ctx, "b", "E2", "dave", "old client"); err != nil {
		t.Fatal(err)
	}
	if err := l.Audit().Queue(WithRole(ctx, "operator"), "erin", "paused", "maintenance"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, trail := range []string{"b", ""} {
		if err := l.Audit().Each(ctx, trail, "", func(e AuditEntry) error {
			got = append(got, e.Actor+"|"+e.Role+"|"+e.To)
			if _, ok := e.Context["role"]; ok {
				t.Errorf("the role is also in the context: %+v", e)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := "carol|operator|cancelled\ndave||cancelled\nerin|operator|paused"
	if strings.Join(got, "\n") != want {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}
