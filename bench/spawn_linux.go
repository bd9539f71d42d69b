package bench

import "syscall"

// childProcAttr puts a gatewayd in its own process group, so that a Ctrl-C at
// the terminal reaches only the harness (which then stops the nodes in
// order), and asks the kernel to kill it if the harness dies without
// cleaning up.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
