//go:build linux

package harness

import "syscall"

// childProcAttr makes the kernel kill a child when the test binary dies
// (for example on a go test -timeout panic), so no component outlives it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
