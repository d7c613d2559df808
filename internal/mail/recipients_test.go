package mail

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acme/payout/internal/proof/testenv/golden"
)

const goodRecipients = `# who gets what
approvers: ann@example.com, bob
operators: Ops Desk <ops@example.com>
role treasury: tina@example.com
role approver: ann@example.com
person bob: Bob B <bob@example.com>
person alice: alice@example.com
makers: finance@example.com
endpoint https://hooks.example.com/payout: dev@example.com, alice
`

func TestParseRecipients(t *testing.T) {
	rc, err := ParseRecipients("recipients", strings.NewReader(goodRecipients))
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(as []string) string { return strings.Join(as, ",") }
	list := func(role string) string {
		var out []string
		for _, a := range rc.Role(role) {
			out = append(out, a.Address)
		}
		return addrs(out)
	}
	cases := []struct{ got, want string }{
		{list(RoleApprover), "ann@example.com,bob@example.com"}, // bob by person line, ann once
		{list(RoleOperator), "ops@example.com"},
		{list("treasury"), "tina@example.com"},
		{list(RoleMaker), "finance@example.com"},
		{list("nobody"), ""},
		{rc.Person("alice").Address, "alice@example.com"},
		{rc.Endpoint("https://hooks.example.com/payout")[1].Address, "alice@example.com"},
		{rc.Endpoint("unknown")[0].Address, "ops@example.com"}, // no owner: the operators
		{Without(rc.Role(RoleApprover), rc.Person("bob"))[0].Address, "ann@example.com"},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("case %d: got %q, want %q", i, c.got, c.want)
		}
	}
	if rc.Person("carol") != nil {
		t.Error("carol has no person line")
	}
}

// TestParseRecipientsErrors: every wrong line at once, as FILE:LINE: what
// is wrong (golden listing).
func TestParseRecipientsErrors(t *testing.T) {
	bad := `approvers: ann@example.com, carol
operators:
role Big Boss: x@example.com
person bob: not an address
person bob: bob@example.com
person two words: x@example.com
colour: blue
no colon here
endpoint : x@example.com
approvers: <broken@
`
	_, err := ParseRecipients("recipients.conf", strings.NewReader(bad))
	if err == nil {
		t.Fatal("accepted")
	}
	if !errors.Is(err, ErrConfig) {
		t.Errorf("%v does not match ErrConfig", err)
	}
	golden.CheckString(t, filepath.Join("testdata", "recipients-errors.txt"), err.Error()+"\n")
}
