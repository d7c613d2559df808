package lifecycle

import (
	"regexp"
	"testing"
)

var stateColor = regexp.MustCompile(`^#[0-9a-f]{6}$`)

// TestMachineIsWellFormed checks the declared table itself: ranks are a
// permutation, every move names declared states and roles, no move is
// declared twice, every state can be reached from a registration, and
// every state that is not final has a way out.
func TestMachineIsWellFormed(t *testing.T) {
	known := map[State]bool{}
	ranks := map[int]bool{}
	for _, s := range Machine {
		if known[s.State] {
			t.Errorf("state %s declared twice", s.State)
		}
		known[s.State] = true
		if s.Rank < 0 || s.Rank >= len(Machine) || ranks[s.Rank] {
			t.Errorf("state %s: rank %d is not a free position in States", s.State, s.Rank)
		}
		ranks[s.Rank] = true
		if s.Label == "" || s.Meaning == "" {
			t.Errorf("state %s lacks a label or a meaning", s.State)
		}
		if !stateColor.MatchString(s.Color) || !stateColor.MatchString(s.Tint) {
			t.Errorf("state %s: colours %q, %q are not #hex (the pages print them into CSS)", s.State, s.Color, s.Tint)
		}
	}
	roles := map[Role]bool{}
	for _, r := range Roles {
		roles[r] = true
	}
	seen := map[Transition]bool{}
	out := map[State]bool{}
	for _, tr := range Transitions {
		key := Transition{From: tr.From, To: tr.To, By: tr.By}
		if seen[key] {
			t.Errorf("move %s -> %s by %s declared twice", tr.From, tr.To, tr.By)
		}
		seen[key] = true
		if (tr.From != "" && !known[tr.From]) || !known[tr.To] || !roles[tr.By] || tr.Note == "" {
			t.Errorf("move %+v names an undeclared state or role, or lacks its note", tr)
		}
		if tr.From == tr.To {
			t.Errorf("move %+v goes nowhere", tr)
		}
		out[tr.From] = true
	}
	reached := map[State]bool{"": true}
	for changed := true; changed; {
		changed = false
		for _, tr := range Transitions {
			if reached[tr.From] && !reached[tr.To] {
				reached[tr.To], changed = true, true
			}
		}
	}
	for _, s := range Machine {
		if !reached[s.State] {
			t.Errorf("state %s cannot be reached", s.State)
		}
		if !s.Final && !out[s.State] {
			t.Errorf("state %s is not final and has no way out", s.State)
		}
		if s.State.Final() != s.Final {
			t.Errorf("%s.Final() = %v, table says %v", s.State, s.State.Final(), s.Final)
		}
	}
}
