//go:build unix

package loader

import (
	"github.com/acme/payout/internal/identity"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// fileOwner is the system identity of the account that owns a file, the
// one that delivered it to the spool: "system:spool(uid 1001 erp-drop)"
// ("system:spool(uid 1001)" when the name is unknown, "" when it cannot
// be told). It is never a person (identity.System).
func fileOwner(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return identity.System("spool", "uid "+uid+" "+u.Username)
	}
	return identity.System("spool", "uid "+uid)
}
