package ledger

import (
	"regexp"
	"strconv"
	"testing"
)

// argvRE matches a literal ARGV index in a script's body.
var argvRE = regexp.MustCompile(`ARGV\[(\d+)\]`)

// highestARGV is the highest literal ARGV index lua reads (0: none).
func highestARGV(lua string) int {
	n := 0
	for _, m := range argvRE.FindAllStringSubmatch(lua, -1) {
		if i, _ := strconv.Atoi(m[1]); i > n {
			n = i
		}
	}
	return n
}

// TestTransitionArgsMatchTheirScripts: each transition script's arguments
// are a Go struct whose argv method lists them in the order the script
// reads them (luaReplay then reads the actor and the operation id from
// the end). A field added to the struct but not to the script, or an
// ARGV[n] the struct does not provide, fails here naming the script.
func TestTransitionArgsMatchTheirScripts(t *testing.T) {
	for _, c := range []struct {
		name string
		lua  string
		args scriptArgs
	}{
		{"beginCreateScript", beginCreateLua, beginArgs{}},
		{"finishCreateScript", finishCreateLua, finishArgs{}},
		{"applyCheckScript", applyCheckLua, checkArgs{}},
		{"applyOutcomeScript", applyOutcomeLua, outcomeArgs{}},
		{"cancelScript", cancelLua, cancelArgs{}},
		{"interruptScript", interruptLua, interruptArgs{}},
		{"resolveScript", resolveLua, resolveArgs{}},
		{"contradictScript", contradictLua, contradictArgs{}},
		{"holdOverScript", holdOverLua, holdArgs{}},
		{"releaseHeldScript", releaseHeldLua, releaseArgs{}},
	} {
		if got, want := highestARGV(c.lua), len(c.args.argv()); got != want {
			t.Errorf("%s reads up to ARGV[%d], but %T.argv gives %d arguments", c.name, got, c.args, want)
		}
	}
}

// TestHighestARGVReadsTheBody: the count the test above compares.
func TestHighestARGVReadsTheBody(t *testing.T) {
	for lua, want := range map[string]int{
		"":                               0,
		"local a = ARGV[1]":              1,
		"ARGV[3] .. ARGV[12] .. ARGV[2]": 12,
		"ARGV[#ARGV]":                    0,
	} {
		if got := highestARGV(lua); got != want {
			t.Errorf("highestARGV(%q) = %d, want %d", lua, got, want)
		}
	}
}
