// Package webhook delivers order notifications to merchants (contract
// section 6, interface 6.1): webhooks in one package, from a committed
// notification to its receiver.
//
//   - The dispatcher (dispatcher.go) is the leader's view of the outbox:
//     what is due, what is handed out and until when; it feeds a supervised
//     actor tree (endpoint.go): one endpoint actor per receiver, one
//     delivery actor per attempt, and what an attempt commits (its result
//     and the next due time, NextAttemptAt). DESIGN.md says why.
//   - The Client (client.go) makes one attempt: one signed POST, judged
//     delivered only on HTTP 200 with a JSON object whose "status" is "ok".
//   - The Guard (guard.go) keeps callback URLs out of the node's own
//     network, at request time and at dial time (below).
//   - AdminView (admin_view.go) is a notification as the admin API shows it.
//
// The outbox's records and their pure rules (what a notification is, how an
// attempt's result changes it) are the subpackage outbox: no storage, no
// HTTP, so persistence stores them and applies the rule in the FSM while
// knowing nothing of this package: the dependency points one way, from
// delivery to storage to the rules. The order actors do
// not know this package either; node wires it to the store, the Raft
// proposer and the FSM's commit hook (Dispatcher.Offer).
//
// # SSRF guard
//
// A callback_url is chosen by the merchant, so without a guard the gateway
// could be made to send requests into its own network: to loopback services,
// private (10/8, 172.16/12, 192.168/16), carrier-grade NAT (100.64/10),
// link-local (169.254/16, fe80::/10) and unique-local (fc00::/7) ranges, the
// unspecified address (0.0.0.0, ::, which Linux connects to the local host),
// multicast and broadcast, reserved and documentation ranges, and above all the
// cloud metadata endpoints (169.254.169.254, fd00:ec2::254) that hand out
// credentials. IPv4 addresses wrapped in IPv6 (IPv4-mapped ::ffff:a.b.c.d,
// IPv4-compatible ::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16) are unwrapped
// and judged as IPv4. For IPv6 only global unicast (2000::/3) outside the
// special-purpose blocks is accepted, and any address carrying a zone is
// refused.
//
// The guard is applied twice:
//
//   - At request time, [Guard.CheckURL] validates the callback_url the
//     merchant sends: http or https, a host, no user information, a port in
//     range, and, when the host is an IP literal, an address outside the
//     forbidden set. Numeric hosts that are not a canonical dotted quad
//     (2130706433, 0177.0.0.1, 0x7f.0.0.1, 127.1, 127.000.000.001) are refused
//     as ambiguous, since resolvers and browsers read them as IPv4 in
//     different ways. Host names reserved for local or internal use
//     (localhost, *.localhost, *.local, *.internal such as
//     metadata.google.internal, *.home.arpa, single-label names) are refused
//     too. Its errors are plain sentences for the API's callback_url
//     attribute.
//
//   - At dial time, [Guard.DialContext] resolves the host itself and refuses
//     every address in the forbidden set before a socket is opened, and
//     [Guard.Control] checks the exact address each socket is about to
//     connect to. A name that resolves to 127.0.0.1, a DNS record that
//     changed since the request was accepted (DNS rebinding), or a URL stored
//     before the policy tightened is therefore still stopped. Ambiguous
//     numeric hosts and reserved names are refused there without any DNS
//     query.
//
// Redirects are never followed: a 3xx answer is a failed attempt, so a
// receiver cannot bounce the gateway to an internal address. The Client never
// uses an HTTP proxy from the environment, so the guard always sees the real
// destination.
//
// With AllowPrivate (the --allow-private-callbacks flag, set by --dev) only
// the syntax checks apply and every address may be dialled.
//
// # Client
//
// The Client is built on fasthttp rather than net/http: a kept-alive
// connection waits in the pool without the two goroutines net/http keeps per
// connection, and an attempt reuses pooled request and response objects.
// Notifications are sent over HTTP/1.1 only; HTTP/2 is not negotiated, even
// with receivers that offer it. Every connection comes from the guard's
// dialer, and for https its TLS handshake (TLS 1.2 or later, certificate
// and host name verified) is part of connecting. As net/http noticed with its
// per-connection reader, a kept-alive connection the receiver has closed
// (or written to unasked) is not reused: it is checked just before reuse, on
// Unix systems; elsewhere an attempt on it fails as "connection closed before
// response" and the next attempt opens a new one.
package webhook
