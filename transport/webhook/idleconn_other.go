//go:build !unix

package webhook

import "net"

// idleConnUsable cannot look at the socket here: a kept-alive connection the
// receiver has closed is found out only when an attempt fails on it.
func idleConnUsable(net.Conn) bool { return true }
