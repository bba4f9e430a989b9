//go:build !linux

package harness

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }
