//go:build unix && !linux

package bench

import "syscall"

// childProcAttr puts a gatewayd in its own process group, so that a Ctrl-C at
// the terminal reaches only the harness, which then stops the nodes.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
