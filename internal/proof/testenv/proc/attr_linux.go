package proc

import "syscall"

// procAttr makes the kernel kill a subprocess when its parent dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
