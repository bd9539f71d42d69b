package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Request-time refusals returned by [Guard.CheckURL]. Each message is a plain
// sentence fit for the API's callback_url attribute; compare with errors.Is.
var (
	ErrInvalidURL     = errors.New("callback_url must be a valid absolute URL")
	ErrScheme         = errors.New("callback_url must use the http or https scheme")
	ErrNoHost         = errors.New("callback_url must include a host")
	ErrUserinfo       = errors.New("callback_url must not contain a user name or password")
	ErrInvalidHost    = errors.New("callback_url host is not a valid host name or IP address")
	ErrAmbiguousHost  = errors.New("callback_url host must be a host name or a standard dotted-decimal IP address")
	ErrPort           = errors.New("callback_url port must be between 1 and 65535")
	ErrPrivateAddress = errors.New("callback_url must not point to a private, loopback or link-local address")
	ErrInternalHost   = errors.New("callback_url must not point to localhost or an internal host name")
)

// ErrRefused is wrapped by every dial-time refusal of the guard
// ([Guard.DialContext], [Guard.Control]).
var ErrRefused = errors.New("connection refused by SSRF guard")

// Guard decides which callback destinations may be reached. The zero value
// is the strict guard. A Guard must not be modified once in use; it is then
// safe for concurrent use.
type Guard struct {
	// AllowPrivate permits every destination: only the URL syntax checks of
	// CheckURL remain (--allow-private-callbacks, development).
	AllowPrivate bool

	// Test hooks (unexported: production code cannot set them).

	// allowAddrs are exact destinations permitted although forbidden, so a
	// test can reach one loopback receiver while everything else is blocked.
	allowAddrs []netip.AddrPort
	// lookup replaces DNS resolution of host names at dial time.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// traceSocket sees the exact address of every socket about to connect,
	// before the guard's own check; an error refuses the connect.
	traceSocket func(network, address string) error
}

// CheckURL is the request-time check of a merchant's callback_url. It returns
// nil or one of the Err* values above. It does no DNS resolution: host names
// are judged by name here and by their resolved addresses at dial time.
func (g *Guard) CheckURL(raw string) error {
	if raw == "" || strings.TrimSpace(raw) != raw {
		return ErrInvalidURL
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Scheme == "":
		return ErrInvalidURL
	case u.Scheme != "http" && u.Scheme != "https":
		return ErrScheme
	case u.Opaque != "":
		return ErrInvalidURL
	}
	if u.User != nil {
		return ErrUserinfo
	}
	host := u.Hostname()
	if host == "" {
		return ErrNoHost
	}
	if p := u.Port(); p != "" {
		if _, ok := parsePort(p); !ok {
			return ErrPort
		}
	}

	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return ErrInvalidHost
		}
		if !g.AllowPrivate && forbiddenAddr(a) {
			return ErrPrivateAddress
		}
		return nil
	}

	kind, a, name := classifyHost(host)
	switch kind {
	case hostInvalid:
		return ErrInvalidHost
	case hostAmbiguous:
		return ErrAmbiguousHost
	case hostIP:
		if !g.AllowPrivate && forbiddenAddr(a) {
			return ErrPrivateAddress
		}
	case hostName:
		if !g.AllowPrivate && reservedName(name) {
			return ErrInternalHost
		}
	}
	return nil
}

// DialContext dials address ("host:port") through the guard, for
// http.Transport.DialContext and the like. Unless AllowPrivate, it refuses
// before any socket exists: networks other than TCP, non-numeric or
// out-of-range ports, ambiguous numeric hosts and reserved names (neither is
// ever sent to DNS), and every resolved address in the forbidden set; it then
// connects to the remaining addresses in order, each socket also vetted by
// [Guard.Control]. Refusals wrap [ErrRefused].
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dial(ctx, &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, network, address)
}

// Control is a net.Dialer.Control function: it refuses to connect a socket to
// a forbidden address. It runs after DNS, on the exact address about to be
// connected, before the connect system call.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	if g.traceSocket != nil {
		if err := g.traceSocket(network, address); err != nil {
			return err
		}
	}
	if g.AllowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable address %q", ErrRefused, address)
	}
	if !g.permitted(ap) {
		return fmt.Errorf("%w: %s", ErrRefused, address)
	}
	return nil
}

// dial resolves the host itself and connects only to permitted addresses, in
// order, with d's settings (its Timeout bounds resolution and all connects
// together) plus Control.
// Without AllowPrivate, before any socket exists it refuses: networks other
// than TCP, ports that are not numbers in range, ambiguous numeric hosts and
// reserved names (neither is ever sent to DNS), and every resolved address in
// the forbidden set.
func (g *Guard) dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	dd := *d
	dd.Control, dd.ControlContext = g.Control, nil
	if g.AllowPrivate {
		return dd.DialContext(ctx, network, address)
	}
	if dd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dd.Timeout)
		defer cancel()
		dd.Timeout = 0
	}
	addrs, port, err := g.resolve(ctx, network, address)
	if err != nil {
		return nil, err
	}
	var firstErr error
	for _, a := range addrs {
		c, err := dd.DialContext(ctx, network, netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// resolve turns address into the permitted IPs to connect to and the port
// (strict mode only).
func (g *Guard) resolve(ctx context.Context, network, address string) ([]netip.Addr, uint16, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, 0, fmt.Errorf("%w: network %q", ErrRefused, network)
	}
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrRefused, err)
	}
	port, ok := parsePort(p)
	if !ok {
		return nil, 0, fmt.Errorf("%w: port %q", ErrRefused, p)
	}
	var candidates []netip.Addr
	if a, perr := netip.ParseAddr(host); perr == nil {
		candidates = []netip.Addr{a}
	} else {
		kind, a, name := classifyHost(host)
		switch {
		case kind == hostIP:
			candidates = []netip.Addr{a}
		case kind == hostName && !reservedName(name):
			if candidates, err = g.lookupName(ctx, network, name); err != nil {
				return nil, 0, err
			}
		default: // invalid, ambiguous numeric, or reserved name: no DNS query
			return nil, 0, fmt.Errorf("%w: host %q", ErrRefused, host)
		}
	}
	return g.filter(candidates, port, address)
}

// filter keeps the permitted addresses; none left is a refusal.
func (g *Guard) filter(candidates []netip.Addr, port uint16, address string) ([]netip.Addr, uint16, error) {
	out := candidates[:0:0]
	for _, a := range candidates {
		if g.permitted(netip.AddrPortFrom(a, port)) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%w: %s", ErrRefused, address)
	}
	return out, port, nil
}

func (g *Guard) lookupName(ctx context.Context, network, name string) ([]netip.Addr, error) {
	if g.lookup != nil {
		return g.lookup(ctx, name)
	}
	ipNet := "ip"
	switch network {
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	}
	return net.DefaultResolver.LookupNetIP(ctx, ipNet, name)
}

// permitted reports whether the guard lets a socket connect to ap.
func (g *Guard) permitted(ap netip.AddrPort) bool {
	if g.AllowPrivate || !forbiddenAddr(ap.Addr()) {
		return true
	}
	want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	for _, a := range g.allowAddrs {
		if netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) == want {
			return true
		}
	}
	return false
}

func parsePort(p string) (uint16, bool) {
	if p == "" || len(p) > 5 {
		return 0, false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

type hostKind int

const (
	hostInvalid   hostKind = iota
	hostIP                 // canonical dotted-quad IPv4
	hostAmbiguous          // numeric, but not a canonical dotted quad
	hostName               // a DNS name
)

// classifyHost judges an unbracketed host. It lowercases it and drops one
// trailing dot. A host whose last label is a number (decimal, or 0x hex) is
// read as IPv4 by browsers (WHATWG "ends in a number") and by inet_aton based
// resolvers, so anything but a canonical dotted quad is ambiguous.
func classifyHost(h string) (hostKind, netip.Addr, string) {
	h = strings.ToLower(h)
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return hostInvalid, netip.Addr{}, ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return hostInvalid, netip.Addr{}, ""
		}
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return hostInvalid, netip.Addr{}, ""
		}
	}
	if isNumericLabel(labels[len(labels)-1]) {
		if a, err := netip.ParseAddr(h); err == nil && a.Is4() {
			return hostIP, a, ""
		}
		return hostAmbiguous, netip.Addr{}, ""
	}
	return hostName, netip.Addr{}, h
}

func isNumericLabel(l string) bool {
	if strings.HasPrefix(l, "0x") {
		for i := 2; i < len(l); i++ {
			c := l[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}

// reservedSuffixes are name spaces for local or internal use only: .localhost
// (RFC 6761), .local (mDNS, RFC 6762), .internal (ICANN private use, e.g.
// metadata.google.internal), .arpa (incl. home.arpa, RFC 8375), and the
// private-use names of RFC 6762 appendix G that are not delegated publicly.
var reservedSuffixes = []string{
	".localhost", ".localdomain", ".local", ".internal", ".arpa",
	".lan", ".home", ".corp", ".intranet", ".private",
}

// reservedNames are single names known to lead to instance metadata.
var reservedNames = []string{"metadata.goog"}

// reservedName reports whether a lowercased DNS name without trailing dot is
// for local or internal use. Single-label names resolve through search
// domains to internal hosts (localhost, metadata, instance-data, kubernetes).
func reservedName(name string) bool {
	if !strings.Contains(name, ".") {
		return true
	}
	for _, s := range reservedSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	for _, n := range reservedNames {
		if name == n {
			return true
		}
	}
	return false
}

var (
	forbidden4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network", unspecified
		netip.MustParsePrefix("10.0.0.0/8"),      // private
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (also Alibaba metadata 100.100.100.200)
		netip.MustParsePrefix("127.0.0.0/8"),     // loopback
		netip.MustParsePrefix("169.254.0.0/16"),  // link-local, metadata 169.254.169.254
		netip.MustParsePrefix("172.16.0.0/12"),   // private
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments (Oracle metadata 192.0.0.192)
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
		netip.MustParsePrefix("192.168.0.0/16"),  // private
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("224.0.0.0/4"),     // multicast
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and 255.255.255.255 broadcast
	}
	global6   = netip.MustParsePrefix("2000::/3")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// Special-purpose blocks inside 2000::/3.
	forbidden6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments: Teredo, benchmarking, ORCHID
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("3fff::/20"),     // documentation
	}
)

// forbiddenAddr reports whether a is in the forbidden set: any zoned address;
// IPv4 in forbidden4; IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4)
// judged as IPv4; any other IPv6 outside global unicast or in forbidden6.
// This covers loopback, private, link-local, unique-local (fc00::/7, with
// fd00:ec2::254), unspecified, multicast and broadcast addresses.
func forbiddenAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return true
	}
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		for _, p := range forbidden4 {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return forbiddenAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return forbiddenAddr(netip.AddrFrom4([4]byte(b[2:6])))
	case !global6.Contains(a): // ::/8 (incl. ::, ::1, ::a.b.c.d), fc00::/7, fe80::/10, ff00::/8, ...
		return true
	}
	for _, p := range forbidden6 {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
