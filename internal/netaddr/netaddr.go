// Package netaddr says whether an address names this machine only: the one
// check behind every "loopback only" rule (the node's --pprof-addr and
// insecure cluster links, the admin API's join of such a cluster,
// acquirerd's listeners, the load harness's targets). It imports nothing of
// the project, so any package may use it.
package netaddr

import (
	"net"
	"strings"
)

// LoopbackHost reports whether host is a loopback IP address (127.0.0.0/8,
// ::1) or localhost. Any other name may resolve anywhere, so it is not.
func LoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Loopback reports whether host:port names this machine only. An address
// without a port, or one with no host (":8080", every interface), is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}
