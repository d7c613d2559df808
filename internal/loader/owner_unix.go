//go:build unix

package loader

import (
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// fileOwner is the user name of a file's owner ("uid:N" when the name is
// unknown, "" when it cannot be told).
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
		return u.Username
	}
	return "uid:" + uid
}
