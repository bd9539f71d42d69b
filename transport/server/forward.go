package server

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/apierr"
)

// ForwardedHeader marks a request a follower forwarded to the leader over
// the cluster port. Its value is the forwarding node's id. A node that
// receives a forwarded request (one with this header on its peer service) while not
// leading answers 503 6.02 rather than forward it again, so a request
// crosses at most one hop even while leadership moves. On the HTTP listener
// the header means nothing.
const ForwardedHeader = "X-Gateway-Forwarded-By"

// forwardDialTimeout bounds connecting to the leader.
const forwardDialTimeout = 2 * time.Second

// forwarder relays requests to the leader over pooled keep-alive peer
// connections on the cluster port (mutual TLS: the card data and signatures
// they carry never cross the network in clear).
type forwarder struct {
	client  *fasthttp.Client
	timeout time.Duration
	// relayed counts forwarded requests; failed those the leader did not
	// answer (the caller got 503 6.02).
	relayed, failed *metrics.Counter
}

func newForwarder(requestTimeout time.Duration, dial PeerDialer) *forwarder {
	// The leader answers within its own request timeout; allow for the hop.
	timeout := requestTimeout + 5*time.Second
	return &forwarder{
		timeout: timeout,
		client: &fasthttp.Client{
			Name:                          "gatewayd-forward",
			NoDefaultUserAgentHeader:      true,
			MaxConnsPerHost:               1024,
			MaxIdleConnDuration:           30 * time.Second,
			MaxConnWaitTimeout:            forwardDialTimeout,
			ReadTimeout:                   timeout,
			WriteTimeout:                  10 * time.Second,
			MaxResponseBodySize:           bodyBytesHardMax,
			DisableHeaderNamesNormalizing: true,
			DisablePathNormalizing:        true,
			// Never resend: a POST the leader may have acted on is the
			// client's to retry (with the same order_id / Idempotency-Key).
			MaxIdemponentCallAttempts: 1,
			Dial: func(addr string) (net.Conn, error) {
				return dial(addr, forwardDialTimeout)
			},
		},
		relayed: metrics.GetOrCreateCounter(`gateway_forwarded_requests_total`),
		failed:  metrics.GetOrCreateCounter(`gateway_forwarded_requests_failed_total`),
	}
}

// forward decides where a request is served; it is the one place that does.
// On the leader it passes the read barrier (cluster.ReadBarrier) and returns
// handled=false: the request goes on to dispatch here. On a follower it sends
// the request as received (method, path, headers, body) to the leader's
// peer service and relays the leader's answer as is (status, body,
// Retry-After); the leader verifies the signature again. An admin request
// goes without its bearer token: this node checked it, and the token never
// leaves the node it was sent to. With no reachable leader it answers 503 6.02
// with Retry-After. status is what was written when handled.
func (s *Server) forward(ctx *fasthttp.RequestCtx) (handled bool, status int) {
	c := s.cfg.Cluster
	if c == nil {
		return false, 0
	}
	unavailable := func(msg string) (bool, int) {
		e := apierr.New(apierr.Unavailable, "cluster", msg)
		writeError(ctx, e)
		return true, e.Code.HTTP
	}
	route := c.Route()
	if route.Self {
		// No per-request deadline: the barrier is bounded by the cluster's
		// apply timeout, one timer per shared confirmation round.
		if err := c.ReadBarrier(context.Background()); err != nil {
			return unavailable("leadership is changing; retry the same request")
		}
		return false, 0
	}
	if fromPeer(ctx) && len(ctx.Request.Header.Peek(ForwardedHeader)) > 0 {
		return unavailable("this node is not the leader; retry the same request")
	}
	if route.LeaderRaft == "" {
		return unavailable("no leader; retry the same request")
	}

	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ctx.Request.CopyTo(req)
	req.URI().SetScheme("http")
	req.SetHost(route.LeaderRaft)
	req.Header.Del("Connection")
	req.Header.Del("Authorization")
	req.Header.Set(ForwardedHeader, c.SelfMember().NodeID)
	req.Header.Set(clientIPHeader, ctx.RemoteIP().String()) // for the leader's audit record
	req.Header.Del(clientTLSHeader)
	if ctx.IsTLS() { // the leader's dashboard marks its session cookie Secure
		req.Header.Set(clientTLSHeader, "1")
	}
	req.Header.Del(actorHeader)
	if actor, ok := ctx.UserValue(auditActorKey).(string); ok {
		req.Header.Set(actorHeader, actor) // who the leader's audit record names
	}
	if err := s.fwd.client.DoTimeout(req, resp, s.fwd.timeout); err != nil {
		s.fwd.failed.Inc()
		s.cfg.Logger.Warn("forward to leader failed", "leader_id", route.LeaderID, "leader_raft", route.LeaderRaft, "error", err)
		if repeatIsANewRefund(ctx) && !neverSent(err) { // the leader may have made it
			e := refundOutcomeUnknown()
			writeError(ctx, e)
			return true, e.Code.HTTP
		}
		return unavailable("the leader cannot be reached; retry the same request")
	}
	s.fwd.relayed.Inc()
	ctx.SetStatusCode(resp.StatusCode())
	if ct := resp.Header.ContentType(); len(ct) > 0 {
		ctx.Response.Header.SetContentTypeBytes(ct)
	}
	for _, h := range relayedHeaders {
		if v := resp.Header.Peek(h); len(v) > 0 {
			ctx.Response.Header.SetBytesV(h, v)
		}
	}
	resp.Header.VisitAllCookie(func(_, cookie []byte) { // the dashboard's session
		c := fasthttp.AcquireCookie()
		if c.ParseBytes(cookie) == nil {
			ctx.Response.Header.SetCookie(c)
		}
		fasthttp.ReleaseCookie(c)
	})
	ctx.SetBody(resp.Body())
	return true, resp.StatusCode()
}

// relayedHeaders are the leader's answer headers a follower passes on:
// the API's, and the dashboard's redirect and page policies.
var relayedHeaders = []string{"Retry-After", "Allow", "Location", "Cache-Control", "Content-Security-Policy",
	"X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"}

// clientTLSHeader says, on a forwarded request, that the client reached
// the follower over TLS. Like clientIPHeader it is read only from a peer.
const clientTLSHeader = "X-Gateway-Client-TLS"

// neverSent reports whether a forward failed before any of the request
// could reach the leader: no connection was made (refused, unreachable,
// timed out while dialling) or none was free. A refund without a key that
// failed so was not made, and is safe to send again (503), where one that
// failed later may have been (500).
func neverSent(err error) bool {
	if errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
