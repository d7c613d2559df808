package access

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	tests := []struct {
		roles Roles
		may   []Action
		not   []Action
	}{
		{roles: 0, not: []Action{Read, Load, Approve}},
		{roles: Of(Viewer), may: []Action{Read}, not: []Action{Load, Approve, Discard, Cancel, Pause, Administer}},
		{roles: Of(Maker), may: []Action{Read, Load}, not: []Action{Approve, Discard, Cancel, MarkCreated}},
		{roles: Of(Approver), may: []Action{Read, Approve, Discard}, not: []Action{Load, Cancel, Recheck, Pause}},
		{roles: Of(Operator), may: []Action{Read, Cancel, Recheck, MarkCreated, MarkRejected, Release, Pause, Resume, Redeliver, Reconcile, Archive}, not: []Action{Load, Approve, Administer}},
		{roles: Of(Admin), may: []Action{Read, Administer}, not: []Action{Load, Approve, Cancel}},
		{roles: Everyone, may: []Action{Read, Load, Approve, Cancel}, not: []Action{Administer}},
		{roles: Of(Maker, Approver), may: []Action{Load, Approve}, not: []Action{Cancel}},
	}
	for _, tt := range tests {
		for _, a := range tt.may {
			if !tt.roles.Allows(a) {
				t.Errorf("%s may not %s: want allowed", tt.roles, a)
			}
		}
		for _, a := range tt.not {
			if tt.roles.Allows(a) {
				t.Errorf("%s may %s: want refused", tt.roles, a)
			}
		}
	}
	if Everyone.Allows("fly") {
		t.Error("an unknown action is allowed")
	}
}

func TestEveryActionNeedsARole(t *testing.T) {
	for a, r := range needs {
		if bit(r) == 0 {
			t.Errorf("action %s needs unknown role %q", a, r)
		}
	}
}

func TestPrincipalActsInTheRoleTheActionNeeds(t *testing.T) {
	p := Principal{Name: "bob", Roles: Of(Approver, Operator)}
	if r, ok := p.As(Approve); !ok || r != Approver {
		t.Errorf("As(approve) = %s, %v; want approver, true", r, ok)
	}
	if r, ok := p.As(Pause); !ok || r != Operator {
		t.Errorf("As(pause) = %s, %v; want operator, true", r, ok)
	}
	if _, ok := p.As(Load); ok {
		t.Error("As(load) allowed an approver and operator to load")
	}
}

func TestParseRoles(t *testing.T) {
	tests := []struct {
		in   string
		want string
		bad  bool
	}{
		{in: "maker", want: "viewer,maker"},
		{in: " Approver , operator ", want: "viewer,approver,operator"},
		{in: "viewer", want: "viewer"},
		{in: "", want: "none"},
		{in: "approvr", bad: true},
		{in: "maker,root", bad: true},
	}
	for _, tt := range tests {
		got, err := ParseRoles(tt.in)
		if tt.bad {
			if !errors.Is(err, ErrUnknownRole) {
				t.Errorf("ParseRoles(%q) = %s, %v: want ErrUnknownRole", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("ParseRoles(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

const rolesFile = `# roles of the finance team
person alice: maker
person Bob@Example.com: approver, operator
group finance-approvers: approver
group payout-oncall: operator

default: viewer
`

func TestRolesFile(t *testing.T) {
	m, err := Parse("roles", strings.NewReader(rolesFile))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		groups []string
		want   string
	}{
		{name: "alice", want: "viewer,maker"},
		{name: "ALICE", want: "viewer,maker"},
		{name: "bob@example.com", want: "viewer,approver,operator"},
		{name: "carol", want: "viewer"},
		{name: "carol", groups: SplitGroups("finance-approvers, payout-oncall"), want: "viewer,approver,operator"},
		{name: "alice", groups: SplitGroups("finance-approvers"), want: "viewer,maker,approver"},
		{name: "dave", groups: SplitGroups("Finance-Approvers"), want: "viewer"}, // groups match exactly
		{name: "alice\u200b", want: "viewer"},                                    // not alice
	}
	for _, tt := range tests {
		if got := m.For(tt.name, tt.groups).String(); got != tt.want {
			t.Errorf("For(%q, %q) = %s; want %s", tt.name, tt.groups, got, tt.want)
		}
	}
	none, err := Parse("roles", strings.NewReader("person alice: maker\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := none.For("carol", nil); got != 0 {
		t.Errorf("without a default line, carol holds %s; want none", got)
	}
}

func TestRolesFileErrorsNameTheLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "person alice maker\n", want: "roles:1: want"},
		{in: "# c\nperson alice: makr\n", want: `roles:2: unknown role "makr"`},
		{in: "person alice: maker\nperson ALICE: approver\n", want: `roles:2: person "alice" is given twice`},
		{in: "group g: approver\ngroup g: operator\n", want: `roles:2: group "g" is given twice`},
		{in: "default: viewer\ndefault: maker\n", want: "roles:2: a second default line"},
		{in: "person : maker\n", want: "roles:1:"},
		{in: "person al\u200bice: maker\n", want: "roles:1:"},
		{in: "team x: maker\n", want: `roles:1: "team x": want`},
		{in: "person alice:\n", want: "roles:1: no role named"},
	}
	for _, tt := range tests {
		_, err := Parse("roles", strings.NewReader(tt.in))
		if err == nil || !errors.Is(err, ErrRolesFile) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want an ErrRolesFile containing %q", tt.in, err, tt.want)
		}
	}
}

func TestWhySaysTheRoleNeededAndHeld(t *testing.T) {
	tests := []struct {
		p    Principal
		a    Action
		want string
	}{
		{p: Principal{Name: "vic", Roles: Of(Viewer)}, a: Approve, want: "approving needs the approver role; vic holds viewer"},
		{p: Principal{Name: "mo", Roles: Of(Maker)}, a: Cancel, want: "cancelling a payout needs the operator role; mo holds viewer,maker"},
		{p: Principal{Name: "nobody"}, a: Read, want: "reading needs the viewer role; nobody holds none"},
		{p: Principal{Name: "ann", Roles: Of(Approver)}, a: Approve, want: ""},
		{p: Principal{Roles: Of(Viewer)}, a: Load, want: "uploading or loading a file needs the maker role; you hold viewer"},
	}
	for _, tt := range tests {
		if got := tt.p.Why(tt.a); got != tt.want {
			t.Errorf("%+v Why(%s) = %q; want %q", tt.p, tt.a, got, tt.want)
		}
	}
	for a := range needs {
		if _, ok := gerunds[a]; !ok {
			t.Errorf("action %s has no words", a)
		}
	}
}

func TestPrincipalTravelsInTheContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("an empty context carries a principal")
	}
	p := Principal{Name: "alice", Roles: Of(Maker)}
	got, ok := FromContext(NewContext(context.Background(), p))
	if !ok || got != p {
		t.Fatalf("FromContext = %+v, %v; want %+v", got, ok, p)
	}
}
