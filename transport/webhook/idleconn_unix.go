//go:build unix

package webhook

import (
	"crypto/tls"
	"net"
	"syscall"
)

// idleConnUsable reports whether a kept-alive connection can carry another
// request: the receiver has neither closed it nor sent anything since the
// last answer (an idle timeout, a TLS close_notify, an unsolicited 408).
// net/http notices these with a reader goroutine per connection; fasthttp has
// none, so one non-blocking peek at the socket before reuse stands in for it.
// Otherwise a POST sent on a connection the receiver already closed fails
// as "connection closed before response".
func idleConnUsable(conn net.Conn) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	usable := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		// Go's sockets are non-blocking: no data is EAGAIN, not a wait.
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		usable = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK // nothing to read
		return true                                                  // never wait
	})
	return err == nil && usable
}
