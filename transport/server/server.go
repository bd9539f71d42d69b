// Package server is the gateway's HTTP front end (fasthttp): the merchant
// API under /api/v3 and /api/v1, the admin API, health and metrics.
//
// Every merchant operation runs the same pipeline — authenticate, rate
// limit, decode strictly, validate, dispatch, render — and differs only in
// its request type, validator and dispatch function (see endpoints.go).
// Request bytes are copied before they leave a handler: fasthttp reuses them.
//
// It is the inbound edge over everything else, and the one place that turns
// what the layers below refuse into the error catalogue (transport/apierr):
// the domain's rejections (order.Rejection, rejectionError) and the failures
// of a dispatch (errorFor). Nothing below it spells an error code.
package server

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/exposition"
	"github.com/paygate/gateway/transport/operator"
)

// BodyBytesMax is the largest request body accepted (contract section 3).
// Larger bodies are refused with a JSON 413. One of up to bodyBytesHardMax
// is read and discarded first, so that a client that sent a moderately
// large body reads that answer instead of a reset connection; a larger one
// closes the connection after the answer.
const (
	BodyBytesMax     = 1 << 20
	bodyBytesHardMax = 8 << 20
)

// Config is what the front end needs from the node.
type Config struct {
	Logger     *slog.Logger
	Store      *persistence.Store
	Cluster    *cluster.Node
	Registry   *actors.Registry
	Vault      *vault.Vault
	Merchants  *Merchants
	AdminToken string
	// HashKey keys the request hashes kept for idempotency, so a stored
	// hash reveals nothing of the body (which held card data), and the
	// hosted-form tokens. SetHashKey replaces it (the node loads the
	// cluster's replicated key once it has it).
	HashKey []byte
	// RequestTimeout bounds how long a request waits for its order actor.
	RequestTimeout time.Duration
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// CheckCallbackURL refuses callback_url targets the SSRF guard forbids.
	CheckCallbackURL func(raw string) error
	// OnNotify is called after an operator asks for a redelivery.
	OnNotify func()
	// Admin handlers beyond merchants and webhooks (cluster) register here.
	AdminRoutes map[string]AdminHandler
	// Wallets decrypts wallet payment credentials (nil: wallets off).
	Wallets WalletDecrypter
	// VaultCount counts the sealed records the current vault key did not
	// seal (GET /admin/v1/vault).
	VaultCount func() (int, error)
	// Forms configures the hosted payment form and 3-D Secure pages.
	Forms FormConfig
	// DialPeer opens a peer connection to a member's cluster port
	// (cluster/link); nil dials plain TCP (tests of the front end alone).
	DialPeer PeerDialer
	// PKI issues node certificates to joiners (nil: none, as insecure).
	PKI ClusterPKI
	// OperatorIdleTimeout ends an operator's session unused for that long
	// (0: operator.SessionIdleTimeout; sessions.go).
	OperatorIdleTimeout time.Duration
}

// AdminHandler serves one admin route. It writes a JSON answer.
type AdminHandler func(ctx *fasthttp.RequestCtx)

// Server is the HTTP front end.
type Server struct {
	cfg       Config
	http      *fasthttp.Server
	endpoints map[string]namedEndpoint
	metrics   *requestMetrics
	fwd       *forwarder                 // relays requests to the leader (forward.go)
	peers     *PeerClient                // asks members for their status (peer.go)
	audit     auditLog                   // serialises the leader's audit records (admin_audit.go)
	auth      *Auth                      // operators' sign-ins and sessions (sessions.go)
	dashboard fasthttp.RequestHandler    // /dashboard/ (backoffice.go); nil: not served
	hashing   atomic.Pointer[hashKeying] // the request-hash key and its hashers
	// handling counts requests being handled, for Shutdown: a connection
	// with none is not waited for.
	handling atomic.Int64
	// closed is set once Shutdown has drained: nothing more is served.
	closed atomic.Bool
}

// New builds the server.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 15 * time.Second
	}
	if cfg.OperatorIdleTimeout == 0 {
		cfg.OperatorIdleTimeout = operator.SessionIdleTimeout
	}
	if cfg.DialPeer == nil {
		cfg.DialPeer = func(addr string, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("tcp", addr, timeout)
		}
	}
	s := &Server{cfg: cfg, metrics: newRequestMetrics(), fwd: newForwarder(cfg.RequestTimeout, cfg.DialPeer), peers: NewPeerClient(cfg.DialPeer)}
	s.auth = newAuth(s)
	s.SetHashKey(cfg.HashKey)
	s.cfg.AdminRoutes = map[string]AdminHandler{}
	for _, routes := range []map[string]AdminHandler{s.clusterAdminRoutes(), cfg.AdminRoutes} {
		for name, h := range routes {
			s.cfg.AdminRoutes[name] = h
		}
	}
	s.endpoints = map[string]namedEndpoint{}
	for name, ep := range s.merchantEndpoints() {
		s.endpoints[name] = namedEndpoint{name: name, serve: ep}
	}
	s.http = &fasthttp.Server{
		Handler: s.route,
		Name:    "gatewayd",
		// Bodies are streamed to the handler, which reads them as they
		// arrive (readBody). Without streaming fasthttp reserves the whole
		// announced Content-Length before the first byte comes: anyone,
		// unsigned, could pin 8 MiB per connection with a header alone.
		StreamRequestBody:  true,
		MaxRequestBodySize: BodyBytesMax,
		// Nor may fasthttp parse a multipart/form-data body before the
		// handler: in streaming mode it does so with no size limit. The
		// gateway reads no multipart forms; such a body is read as any other.
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  30 * time.Second,
		WriteTimeout:                 30 * time.Second,
		IdleTimeout:                  120 * time.Second,
		ErrorHandler:                 s.transportError,
		NoDefaultDate:                false,
		CloseOnShutdown:              true,
		// fasthttp quotes up to 400 bytes of a request it cannot parse in
		// its error: the body of a charge, card number and CVV included.
		// This covers the request line and the header block as a whole;
		// transportLogger covers the single header lines it still quotes.
		SecureErrorLogMessage: true,
		Logger:                transportLogger{cfg.Logger},
	}
	return s
}

// transportLogger sends fasthttp's own messages (a connection it could not
// serve) to the node's log, at its level and in its format, without the
// request bytes they quote.
type transportLogger struct{ logger *slog.Logger }

func (l transportLogger) Printf(format string, args ...any) {
	if l.logger != nil {
		l.logger.Warn("http transport", "error", redactQuoted(fmt.Sprintf(format, args...)))
	}
}

// redactQuoted replaces every quoted string of a fasthttp message with its
// length, keeping those that are network addresses. SecureErrorLogMessage
// does not reach the errors about one header line ("malformed mime header
// line: %q", "invalid header value %q"), which quote the line: a client that
// leaves out the blank line before a charge's body has its card number and
// CVV read as a header. Every quoted string fasthttp writes comes from %q,
// so it ends at the first unescaped quote; one that does not is cut to the
// message's end.
func redactQuoted(msg string) string {
	if strings.IndexByte(msg, '"') < 0 {
		return msg
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(msg, '"')
		if open < 0 {
			b.WriteString(msg)
			return b.String()
		}
		b.WriteString(msg[:open])
		end := open + 1
		for end < len(msg) && msg[end] != '"' {
			if msg[end] == '\\' {
				end++
			}
			end++
		}
		quoted := msg[open:min(end+1, len(msg))]
		if inner, err := strconv.Unquote(quoted); err == nil && isNetAddr(inner) {
			b.WriteString(quoted)
		} else {
			b.WriteString("<" + strconv.Itoa(len(quoted)) + " quoted bytes withheld>")
		}
		if end >= len(msg) {
			return b.String()
		}
		msg = msg[end+1:]
	}
}

// isNetAddr reports whether s is an IP address with a port, as fasthttp
// quotes a connection's ends.
func isNetAddr(s string) bool {
	host, _, err := net.SplitHostPort(s)
	return err == nil && net.ParseIP(host) != nil
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(ln) }

// shutdownGrace is how long Shutdown waits for requests still arriving on
// open connections once none is being handled.
const shutdownGrace = 2 * time.Second

// Shutdown stops accepting connections and waits for in-flight requests.
// fasthttp closes idle keep-alive connections at once, but waits for one
// that has sent nothing yet or half a request (a browser's preconnect) until
// its read timeout, 30 s. Once no request has been handled for
// shutdownGrace, Shutdown stops waiting for them. When it returns, the
// server answers nothing more: fasthttp goes back to serving the
// connections it stopped waiting for, and the node behind it is about to
// close its store, so a request that comes on one of them is refused with
// 503 6.02 (never acted on, safe to retry).
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.drain(ctx)
	s.closed.Store(true)
	// A request that entered route before closed was set finishes first
	// (route counts itself before it reads the flag).
	for deadline := time.Now().Add(time.Second); s.handling.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// drain runs fasthttp's shutdown until no connection is left, or until no
// request has been handled for shutdownGrace.
func (s *Server) drain(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.http.ShutdownWithContext(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	quietSince := time.Now()
	for {
		select {
		case err := <-done:
			return err
		case now := <-tick.C:
			if s.handling.Load() > 0 {
				quietSince = now
			} else if now.Sub(quietSince) >= shutdownGrace {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					return err
				}
				return nil
			}
		}
	}
}

func (s *Server) route(ctx *fasthttp.RequestCtx) {
	s.handling.Add(1)
	defer s.handling.Add(-1)
	defer s.recoverPanic(ctx)
	if s.closed.Load() {
		ctx.SetConnectionClose()
		writeError(ctx, apierr.New(apierr.Unavailable, "cluster", "the node is shutting down: send the request again"))
		return
	}
	if ambiguousLength(&ctx.Request.Header) {
		// A proxy in front may have framed it the other way: a request
		// smuggled inside this one's body. Nothing after it is trusted.
		ctx.SetConnectionClose()
		s.refuse(ctx, apierr.New(apierr.BadBody, "body", "a request must not carry both Content-Length and Transfer-Encoding"), time.Now())
		return
	}
	if e := readBody(ctx); e != nil {
		s.refuse(ctx, e, time.Now())
		return
	}
	// The merchant operations, the hot path, are found from the path's
	// bytes, without a string of the path per request. No page is one: an
	// operation's name has no '/', and pages are under prefixes ending in one.
	if ep, ok := s.endpointAt(ctx.Path()); ok {
		s.serveMerchant(ctx, ep, true)
		return
	}
	path := string(ctx.Path())
	if s.servePages(ctx, path) {
		return
	}
	switch {
	case path == openAPIPath:
		serveOpenAPI(ctx)
	case strings.HasPrefix(path, "/api/v3/"), strings.HasPrefix(path, "/api/v1/"):
		s.serveMerchant(ctx, namedEndpoint{}, false) // no such operation
	case path == "/cluster/v1/join-info":
		s.serveJoinInfo(ctx) // peer.go
	case path == "/healthz":
		writeJSON(ctx, 200, map[string]string{"status": "ok"})
	case path == "/readyz":
		if s.ready() {
			writeJSON(ctx, 200, map[string]string{"status": "ready"})
		} else {
			writeJSON(ctx, 503, map[string]string{"status": "not ready"})
		}
	case path == "/metrics":
		ctx.SetContentType("text/plain; version=0.0.4")
		exposition.Write(ctx) // # HELP text from one table; an error is the client's going away
	case strings.HasPrefix(path, "/admin/v1/"):
		s.serveAdmin(ctx, path[len("/admin/v1/"):])
	case s.dashboard != nil && (path == "/dashboard" || strings.HasPrefix(path, dashboardPrefix)):
		s.dashboard(ctx)
	default:
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such path"))
	}
}

// recoverPanic turns a panic in one request's handling into a 500 for that
// request instead of the end of the process (and of every other request in
// flight). fasthttp, unlike net/http, does not recover. The log names the
// path and the panic's value and stack, never the body: it may hold card
// data. The connection is closed, since the handler may have left it
// mid-answer.
func (s *Server) recoverPanic(ctx *fasthttp.RequestCtx) {
	v := recover()
	if v == nil {
		return
	}
	s.cfg.Logger.Error("request handler panicked", "path", string(ctx.Path()), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	handlerPanics.Inc()
	ctx.Response.Reset()
	ctx.SetConnectionClose()
	writeError(ctx, apierr.New(apierr.Internal, "server", "the request failed unexpectedly; it was not applied unless status says so"))
}

func bodyTooLarge() *apierr.Error {
	return apierr.New(apierr.BodyTooLarge, "body", "body should be at most 1048576 bytes")
}

// readBody reads the streamed request body into the request, at most
// BodyBytesMax, in a buffer that grows with the bytes that actually
// arrive. A body over the limit is refused (413): one that
// announced up to bodyBytesHardMax is discarded as it arrives so the
// client can read the answer, any other closes the connection after it.
func readBody(ctx *fasthttp.RequestCtx) *apierr.Error {
	req := &ctx.Request
	if !req.IsBodyStream() { // no body, or one fasthttp already read
		if len(req.Body()) > BodyBytesMax {
			ctx.SetConnectionClose()
			return bodyTooLarge()
		}
		return nil
	}
	stream := ctx.RequestBodyStream()
	if n := req.Header.ContentLength(); n > BodyBytesMax {
		if n > bodyBytesHardMax {
			ctx.SetConnectionClose()
		} else if _, err := io.Copy(io.Discard, stream); err != nil {
			ctx.SetConnectionClose()
		}
		return bodyTooLarge()
	}
	buf := bytebufferpool.Get()
	defer bytebufferpool.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(stream, BodyBytesMax+1)); err != nil {
		ctx.SetConnectionClose()
		return apierr.New(apierr.BadBody, "body", "request could not be read")
	}
	if buf.Len() > BodyBytesMax { // a chunked body: no length announced
		ctx.SetConnectionClose()
		return bodyTooLarge()
	}
	req.SetBody(buf.B)
	return nil
}

// readyWait bounds how long a follower's /readyz waits for its store to
// reach the leader's commit index: one that keeps up gets there within
// milliseconds.
const readyWait = 500 * time.Millisecond

// ready is /readyz: the node knows a leader and has caught up. The leader
// knows by itself (cluster.Node.Ready). A follower's own commit index does
// not say how far behind it is, so it asks the leader for its commit index
// and is ready once its store holds it (cluster.Node.CaughtUp).
func (s *Server) ready() bool {
	c := s.cfg.Cluster
	if !c.Ready() {
		return false
	}
	r := c.Route()
	if r.Self {
		return true
	}
	st, err := s.peerSelf(r.LeaderRaft, false)
	if err != nil || !st.Leading() {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyWait)
	defer cancel()
	return c.CaughtUp(ctx, st.CommitIndex)
}

// ambiguousLength reports whether a request's header names both a
// Content-Length and a Transfer-Encoding (RFC 9112 6.3: a server may refuse
// it, and must close the connection after). fasthttp would frame it by
// Transfer-Encoding and forget the length, so the raw header block is read.
func ambiguousLength(h *fasthttp.RequestHeader) bool {
	raw := h.RawHeaders()
	cl, te := false, false
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		name, _, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		name = bytes.TrimSpace(name)
		cl = cl || bytes.EqualFold(name, []byte("Content-Length"))
		te = te || bytes.EqualFold(name, []byte("Transfer-Encoding"))
	}
	return cl && te
}

// transportError answers errors fasthttp meets before the handler (a body
// over the limit, a malformed request) in the contract's JSON shape.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	start := time.Now()
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.refuse(ctx, bodyTooLarge(), start)
		return
	}
	e := apierr.New(apierr.BadBody, "body", "request could not be read")
	// A connection that sent no whole request before the read timeout (a
	// browser's preconnect left idle) is answered, but it made no request
	// to count.
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		writeError(ctx, e)
		return
	}
	s.refuse(ctx, e, start)
}

// refuse answers a request refused before serveMerchant and counts it as
// serveMerchant counts its answers: the request metrics would otherwise
// miss every 413 and 400 2.07.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, e *apierr.Error, start time.Time) {
	writeError(ctx, e)
	s.metrics.observe(s.opLabel(string(ctx.Path())), e.Code.HTTP, start)
}

// hashKeying is one request-hash key and a pool of hashers keyed with it:
// a new key comes with a new pool, so no hasher keyed with the old one is
// used after the swap.
type hashKeying struct {
	key     []byte
	hashers sync.Pool // *requestHasher
}

// SetHashKey makes key the key of the request hashes and form tokens made
// from now on.
func (s *Server) SetHashKey(key []byte) {
	k := &hashKeying{key: append([]byte(nil), key...)}
	k.hashers.New = func() any { return &requestHasher{mac: hmac.New(sha256.New, k.key)} }
	s.hashing.Store(k)
}

// requestHasher is a keyed HMAC-SHA256 state with room for its sum. They are
// pooled and reset between requests: keying one costs more than hashing a
// short body.
type requestHasher struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// requestHash is the keyed hash of a request body, for idempotency.
func (s *Server) requestHash(body []byte) string { return s.operationHash("", body) }

// operationHash is the keyed hash of a request to one operation: the same
// bytes posted to another operation are another request. Settle and refund
// bodies can be byte-identical ({"order_id":…,"amount":…}), so an
// Idempotency-Key used for a settle and then for a refund must not replay
// the settle's answer (contract section 5: a key reused with a different
// request is 409 5.06).
func (s *Server) operationHash(op string, body []byte) string {
	k := s.hashing.Load()
	h := k.hashers.Get().(*requestHasher)
	h.mac.Reset()
	if op != "" {
		h.mac.Write([]byte(op))
		h.mac.Write([]byte{0})
	}
	h.mac.Write(body)
	sum := hex.EncodeToString(h.mac.Sum(h.sum[:0]))
	k.hashers.Put(h)
	return sum
}

// authenticate checks the merchant and signature headers (contract section 2).
func (s *Server) authenticate(ctx *fasthttp.RequestCtx) (*Merchant, *apierr.Error) {
	pk := ctx.Request.Header.Peek("merchant")
	sig := ctx.Request.Header.Peek("signature")
	if len(pk) == 0 {
		return nil, apierr.New(apierr.Auth, "merchant", "merchant header is missing")
	}
	if len(sig) == 0 {
		return nil, apierr.New(apierr.Auth, "signature", "signature header is missing")
	}
	m := s.cfg.Merchants.ByPublicKey(string(pk))
	if m == nil {
		return nil, apierr.New(apierr.Auth, "merchant", "merchant is unknown")
	}
	if !m.apiKey.Verify(ctx.PostBody(), sig) {
		return nil, apierr.New(apierr.Auth, "signature", "signature does not match the request")
	}
	if !m.apiKeyValid(s.cfg.Now()) {
		return nil, apierr.New(apierr.Auth, "merchant", "this API key was replaced by a key rotation and its overlap has ended")
	}
	return m, nil
}

// errorFor maps a dispatch failure to the catalogue. Internal details are
// logged, never returned.
func (s *Server) errorFor(op string, err error) *apierr.Error {
	var ae *apierr.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, cluster.ErrNoLeader), errors.Is(err, actors.ErrTimeout), errors.Is(err, actors.ErrStopped):
		return apierr.New(apierr.Unavailable, "cluster", "the service cannot commit right now; retry the same request")
	}
	s.cfg.Logger.Error("request failed", "op", op, "error", err)
	return apierr.New(apierr.Internal, "server", "internal error")
}

// rejectionError maps a domain rejection (order.Rejection, from the state
// machine or an order actor) to the catalogue: the one place that does.
func rejectionError(r *order.Rejection) *apierr.Error {
	e := apierr.New(rejectionCode(r.Kind), r.Attribute, r.Message)
	for _, f := range r.More {
		e.Add(f.Attribute, f.Message)
	}
	return e
}

func rejectionCode(k order.RejectKind) apierr.Code {
	switch k {
	case order.RejectAmount:
		return apierr.AmountInvalid
	case order.RejectConflict:
		return apierr.Conflict
	case order.RejectNotFound:
		return apierr.NotFound
	case order.RejectReplay, order.RejectInvalid:
		return apierr.Invalid // 422 2.01 (RejectReplay: payment_source, wallet token already used)
	case order.RejectCVV:
		return apierr.CVVInvalid
	case order.RejectTokenInvalid:
		return apierr.TokenInvalid
	case order.RejectCurrency:
		return apierr.CurrencyInvalid
	}
	return apierr.IllegalStatus
}

// marshalJSON encodes an answer with sorted map keys. Answers are plain
// structs, maps and strings, so it does not fail in practice; if it ever
// does, the caller answers 5.03.
func marshalJSON(v any) ([]byte, error) {
	return json.Marshal(v, json.Deterministic(true))
}

// internalErrorBody answers an answer that could not be encoded.
var internalErrorBody = []byte(`{"error":{"code":"` + apierr.Internal.Code + `","messages":{"server":["internal error"]}}}`)

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status, b = apierr.Internal.HTTP, internalErrorBody
	}
	writeRaw(ctx, status, b)
}

func writeRaw(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// writeView answers 200 with an order view, appended to the body buffer
// fasthttp pools with the response (SwapBody hands its bytes over and takes
// them back), so the JSON is written once and allocates nothing.
func writeView(ctx *fasthttp.RequestCtx, v *order.View) {
	ctx.SetStatusCode(200)
	ctx.SetContentType("application/json")
	buf := ctx.Response.SwapBody(nil)
	ctx.Response.SwapBody(v.AppendJSON(buf[:0]))
}

func writeError(ctx *fasthttp.RequestCtx, e *apierr.Error) {
	if e.Code == apierr.RateLimited || e.Code == apierr.Unavailable {
		ctx.Response.Header.Set("Retry-After", "1")
	}
	writeJSON(ctx, e.Code.HTTP, e.Body())
}
