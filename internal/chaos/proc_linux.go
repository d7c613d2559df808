package chaos

import "syscall"

// procAttr makes the kernel kill a subprocess when the suite dies, so that
// even a suite killed by a test timeout leaves nothing running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
