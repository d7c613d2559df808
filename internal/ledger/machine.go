package ledger

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/acme/payout/internal/lifecycle"
	"github.com/redis/go-redis/v9"
)

// luaMachine is the Lua prelude of a script that runs as role: ROLE, and
// MOVES, the moves role may make as one string constant,
// '|from>to|from>to|' (from empty for a registration). A constant costs
// nothing per call; may() looks a move up in it with a plain string.find,
// only when the script moves a payout.
func luaMachine(role lifecycle.Role) string {
	var keys []string
	for _, t := range lifecycle.Transitions {
		if t.By == role {
			keys = append(keys, fmt.Sprintf("%s>%s", t.From, t.To))
		}
	}
	sort.Strings(keys)
	return fmt.Sprintf("\nlocal ROLE = '%s'\nlocal MOVES = '|%s|'\n", role, strings.Join(keys, "|"))
}

// declaredScript is a script composed by script(role, body), kept for the tests
// that check the scripts against the machine.
type declaredScript struct {
	at   string // file:line of its declaration
	role lifecycle.Role
	body string // the script's own text, without the preludes
}

// declaredScripts are every script that script(role, body) composed.
var declaredScripts []declaredScript

// script composes a script that may change payouts as role r: the
// machine's prelude for r (luaMachine), luaMove, then body.
func script(r lifecycle.Role, body string) *redis.Script {
	_, file, line, _ := runtime.Caller(1)
	declaredScripts = append(declaredScripts, declaredScript{at: fmt.Sprintf("%s:%d", filepath.Base(file), line), role: r, body: body})
	return redis.NewScript(luaMachine(r) + luaMove + body)
}
