//go:build !unix

package bench

import "syscall"

func childProcAttr() *syscall.SysProcAttr { return nil }
