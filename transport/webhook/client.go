package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math"
	"net"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/signature"
)

// Defaults for zero Config fields.
const (
	DefaultConnectTimeout  = 5 * time.Second
	DefaultResponseTimeout = 10 * time.Second
	// DefaultMaxResponseBytes is the API's own request limit: the contract
	// counts any HTTP 200 with a JSON body whose status is "ok" as
	// delivered, so a receiver that echoes the order back is answered
	// within it (with 4 KiB such a receiver's answers all failed).
	DefaultMaxResponseBytes = 1 << 20
	DefaultUserAgent        = "paygate-webhook/1"
)

// Config configures a Client. Zero fields take the defaults above.
type Config struct {
	// Guard vets every destination at dial time; nil means the strict
	// zero-value Guard.
	Guard *Guard
	// ConnectTimeout bounds DNS, TCP connect and the TLS handshake.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for the response headers after the
	// request is written, and (with ConnectTimeout) the whole attempt.
	ResponseTimeout time.Duration
	// MaxResponseBytes is the most of a response body ever read.
	MaxResponseBytes int64
	// UserAgent is sent as the User-Agent header.
	UserAgent string
}

// Delivery is one notification to send.
type Delivery struct {
	URL       string // the merchant's callback_url
	Body      []byte // the exact JSON body; it is what is signed
	PublicKey string // webhook public key, sent as the merchant header
	// Key signs the body: the merchant's webhook key pair, prepared once
	// (signature.NewKey) so that an attempt does not key an HMAC afresh.
	Key *signature.Key
	// CreatedAt is when the change it notifies was made (Unix
	// nanoseconds, the leader's clock), sent as CreatedAtHeader; 0 sends
	// none. The body's updated_at has whole seconds only.
	CreatedAt int64
}

// CreatedAtHeader carries a notification's Delivery.CreatedAt in RFC 3339
// with nanoseconds, UTC: a receiver can measure how long delivery took, and
// tell which of two notifications of an order is the later change.
const CreatedAtHeader = "Notification-Created-At"

// Attempt is the outcome of one delivery attempt. Error is empty when
// Delivered; otherwise it is a short, stable text safe for an operator view
// (never the response body, never a secret).
type Attempt struct {
	Delivered bool
	HTTPCode  int // 0 when no response was received
	Error     string
	Duration  time.Duration
}

// Attempt.Error values. "http status N" and "redirect not followed (N)" carry
// the status code.
const (
	errInvalidURL    = "invalid url"
	errNoKey         = "no signing key"
	errGuard         = "connect: refused by SSRF guard"
	errDNS           = "connect: dns lookup failed"
	errConnRefused   = "connect: connection refused"
	errConnTimeout   = "connect: timeout"
	errConnect       = "connect: failed"
	errTLSCert       = "tls: certificate verification failed"
	errTLS           = "tls: handshake failed"
	errTimeout       = "timeout"
	errCanceled      = "canceled"
	errConnReset     = "connection reset by receiver"
	errConnClosed    = "connection closed before response"
	errRequest       = "request failed"
	errRead          = "response read failed"
	errTooLarge      = "response body too large"
	errNotOK         = `response is not {"status":"ok"}`
	errStatusPrefix  = "http status "
	errRedirectStart = "redirect not followed ("
)

// Client sends notifications, one attempt per Deliver call. It is safe for
// concurrent use and keeps connections alive between attempts.
type Client struct {
	hc     *fasthttp.Client
	guard  *Guard
	dialer *net.Dialer
	// tlsConfig is cloned for each host, with the host as ServerName, when the
	// first https attempt to it is made.
	tlsConfig       *tls.Config
	ua              string
	max             int
	connectTimeout  time.Duration
	responseTimeout time.Duration
	timeout         time.Duration // whole attempt: ConnectTimeout + ResponseTimeout
	// bodyRead, when set (tests only), is told of each read of a response
	// body that brought bytes: by the first, any memory reserved for the
	// body has been taken.
	bodyRead func()
}

// NewClient returns a Client for cfg.
func NewClient(cfg Config) *Client {
	if cfg.Guard == nil {
		cfg.Guard = &Guard{}
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ResponseTimeout <= 0 {
		cfg.ResponseTimeout = DefaultResponseTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	c := &Client{
		guard:  cfg.Guard,
		dialer: &net.Dialer{KeepAlive: 30 * time.Second},
		// HTTP/1.1 is all fasthttp speaks; saying so lets a receiver that
		// also offers h2 choose correctly.
		tlsConfig:       &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		ua:              cfg.UserAgent,
		max:             int(min(cfg.MaxResponseBytes, math.MaxInt32)),
		connectTimeout:  cfg.ConnectTimeout,
		responseTimeout: cfg.ResponseTimeout,
		timeout:         cfg.ConnectTimeout + cfg.ResponseTimeout,
	}
	c.hc = &fasthttp.Client{
		// Connections only ever come from c.connect (through the guard,
		// never a proxy), and requests go through c.roundTrip.
		ConfigureClient:          c.configureHost,
		Transport:                transport{c},
		NoDefaultUserAgentHeader: true,
		// Many notifications often go to one receiver. Waiting for a free
		// connection is part of connecting.
		MaxConnsPerHost:    512,
		MaxConnWaitTimeout: cfg.ConnectTimeout,
		// Most recently used first, as net/http: the connection least likely
		// to have been closed by the receiver, and the others can expire.
		ConnPoolStrategy:    fasthttp.LIFO,
		MaxIdleConnDuration: 90 * time.Second,
		ReadBufferSize:      64 << 10, // also the most response header accepted
		// A POST the receiver may have acted on is never resent within an
		// attempt; the caller schedules the next attempt.
		MaxIdemponentCallAttempts: 1,
		DisablePathNormalizing:    true, // send the path as url.Parse saw it
	}
	return c
}

// CloseIdleConnections closes kept-alive connections not in use.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Deliver makes one attempt to deliver d: a POST of d.Body to d.URL with
// Content-Type application/json and the merchant and signature headers
// (contract sections 2 and 6). It is Delivered only on HTTP 200 with a body,
// at most MaxResponseBytes, that is a JSON object whose "status" is "ok".
// Redirects are not followed. The whole attempt is bounded by
// ConnectTimeout + ResponseTimeout and by ctx.
//
// Deliver does not apply CheckURL (that is the request-time check); the
// destination is vetted by the Guard at dial time, whatever the URL says.
func (c *Client) Deliver(ctx context.Context, d Delivery) Attempt {
	start := time.Now()
	a := c.deliver(ctx, d)
	a.Duration = time.Since(start)
	return a
}

func (c *Client) deliver(ctx context.Context, d Delivery) Attempt {
	u, err := url.Parse(d.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Attempt{Error: errInvalidURL}
	}
	if d.Key == nil { // never sent unsigned
		return Attempt{Error: errNoKey}
	}
	if err := ctx.Err(); err != nil {
		return Attempt{Error: classify(&attemptError{stageConnect, err})}
	}
	deadline := time.Now().Add(c.timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}

	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	// Built from url.Parse's result rather than parsed again by fasthttp, so
	// the request goes to the host, path and query validated here.
	uri := req.URI()
	uri.SetScheme(u.Scheme)
	uri.SetHost(u.Host)
	uri.SetPath(u.EscapedPath())
	uri.SetQueryString(u.RawQuery)
	if u.User != nil { // sent as basic auth, as net/http did
		uri.SetUsername(u.User.Username())
		pw, _ := u.User.Password()
		uri.SetPassword(pw)
	}
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.SetUserAgent(c.ua)
	req.Header.Set("merchant", d.PublicKey)
	req.Header.Set("signature", d.Key.Sign(d.Body))
	if d.CreatedAt != 0 {
		var b [len(time.RFC3339Nano)]byte
		req.Header.SetBytesV(CreatedAtHeader, time.Unix(0, d.CreatedAt).UTC().AppendFormat(b[:0], time.RFC3339Nano))
	}
	req.SetBodyRaw(d.Body) // not copied: req is released before Deliver returns
	if ctx.Done() != nil {
		req.SetUserValue(ctxKey{}, ctx) // for roundTrip
	}

	err = c.hc.DoDeadline(req, resp, deadline)
	var ae *attemptError
	if err != nil && (!errors.As(err, &ae) || ae.stage != stageBody) {
		return Attempt{Error: classify(err)}
	}
	code := resp.StatusCode()
	a := Attempt{HTTPCode: code}
	switch {
	case code >= 300 && code < 400:
		a.Error = errRedirectStart + strconv.Itoa(code) + ")"
	case code != fasthttp.StatusOK:
		// Not delivered whatever the body says. It was read (up to the limit)
		// only so the connection can be reused.
		a.Error = errStatusPrefix + strconv.Itoa(code)
	case err != nil:
		a.Error = classify(err)
	case !statusOK(resp.Body()):
		a.Error = errNotOK
	default:
		a.Delivered = true
	}
	return a
}

// ctxKey is the Request user value key under which deliver passes the
// attempt's ctx to roundTrip.
type ctxKey struct{}

// stage is how far an attempt got.
type stage uint8

const (
	stageConnect stage = iota // getting a connection: guard, DNS, TCP, TLS, pool
	stageSend                 // writing the request, awaiting the first byte back
	stageHeader               // reading the response header
	stageBody                 // reading the body: the status is known
)

// attemptError is the error that ended an attempt, with the stage it ended
// in: that tells a connect timeout from a response timeout, and a failed
// attempt with a status code from one without.
type attemptError struct {
	stage stage
	err   error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// configureHost sets up the fasthttp.HostClient for one host: its
// connections come from c.connect, with a TLS config naming that host.
func (c *Client) configureHost(hc *fasthttp.HostClient) error {
	var tlsConfig *tls.Config
	if hc.IsTLS {
		host, _, err := net.SplitHostPort(hc.Addr)
		if err != nil {
			return &attemptError{stageConnect, err}
		}
		tlsConfig = c.tlsConfig.Clone()
		tlsConfig.ServerName = host
	}
	hc.DialTimeout = func(addr string, timeout time.Duration) (net.Conn, error) {
		return c.connect(addr, timeout, tlsConfig)
	}
	return nil
}

// connect dials addr through the guard and, for https (tlsConfig set),
// completes the TLS handshake, all within ConnectTimeout, or within timeout,
// what is left of the attempt, if shorter (fasthttp passes 0 when it dials
// for an attempt queued for a free connection). fasthttp uses a returned
// *tls.Conn as is. Errors are stageConnect *attemptErrors.
//
// The attempt's ctx does not reach here: a cancellation during connect is
// noticed once it ends.
func (c *Client) connect(addr string, timeout time.Duration, tlsConfig *tls.Config) (net.Conn, error) {
	if timeout <= 0 || timeout > c.connectTimeout {
		timeout = c.connectTimeout
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	conn, err := c.guard.dial(ctx, c.dialer, "tcp", addr)
	if err == nil && tlsConfig != nil {
		conn, err = handshake(conn, tlsConfig, deadline)
	}
	if err != nil {
		return nil, &attemptError{stageConnect, err}
	}
	return conn, nil
}

func handshake(conn net.Conn, cfg *tls.Config, deadline time.Time) (net.Conn, error) {
	tc := tls.Client(conn, cfg)
	err := conn.SetDeadline(deadline)
	if err == nil {
		err = tc.Handshake()
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}

// transport is the Client's fasthttp.RoundTripper.
type transport struct{ c *Client }

func (t transport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (retry bool, err error) {
	return false, t.c.roundTrip(hc, req, resp)
}

// aLongTimeAgo is a deadline that makes pending I/O fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip sends req and reads the answer into resp, on a kept-alive or new
// connection. It differs from fasthttp's own transport as an attempt needs:
// it waits at most ResponseTimeout for the answer to begin but lets the body
// take until the attempt's deadline (net/http's ResponseHeaderTimeout), it
// reports the stage it failed in (*attemptError), it skips kept-alive
// connections the receiver has closed meanwhile, and it stops when the
// attempt's ctx ends.
func (c *Client) roundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) error {
	deadline := time.Now().Add(req.GetTimeOut())
	ctx, _ := req.UserValue(ctxKey{}).(context.Context)

	cc, err := hc.AcquireConn(time.Until(deadline), false)
	for err == nil && !cc.LastUseTime().IsZero() && !idleConnUsable(cc.Conn()) {
		hc.CloseConn(cc)
		cc, err = hc.AcquireConn(time.Until(deadline), false)
	}
	if ctx != nil && ctx.Err() != nil { // ended while connecting
		if err == nil {
			hc.CloseConn(cc)
		}
		err = ctx.Err()
	}
	if err != nil {
		return &attemptError{stageConnect, err}
	}

	conn := cc.Conn()
	var stop func() bool
	if ctx != nil {
		stop = context.AfterFunc(ctx, func() { conn.SetDeadline(aLongTimeAgo) })
	}
	keep, st, err := c.exchange(hc, conn, req, resp, deadline)
	if stop != nil && !stop() {
		// ctx ended: it is what made I/O fail, and conn's deadline is spoilt.
		if err != nil {
			err = ctx.Err()
		}
		keep = false
	}
	if keep {
		hc.ReleaseConn(cc)
	} else {
		hc.CloseConn(cc)
	}
	if err != nil {
		return &attemptError{st, err}
	}
	return nil
}

// exchange writes req to conn and reads the answer into resp. It returns
// whether conn can be reused, and the stage reached.
func (c *Client) exchange(hc *fasthttp.HostClient, conn net.Conn, req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) (keep bool, st stage, err error) {
	st = stageSend
	if err = conn.SetWriteDeadline(deadline); err != nil {
		return false, st, err
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		return false, st, err
	}

	headerDeadline := time.Now().Add(c.responseTimeout)
	if deadline.Before(headerDeadline) {
		headerDeadline = deadline
	}
	if err = conn.SetReadDeadline(headerDeadline); err != nil {
		return false, st, err
	}
	br := hc.AcquireReader(conn)
	defer hc.ReleaseReader(br)
	// The first byte on its own, so that a receiver that closed or reset
	// the connection without answering is told from a malformed answer.
	if _, err = br.Peek(1); err != nil {
		return false, st, err
	}
	st = stageHeader
	if err = readHeader(&resp.Header, br); err != nil {
		return false, st, err
	}
	code := resp.StatusCode()
	keep = !resp.ConnectionClose() && code != fasthttp.StatusSwitchingProtocols
	if code < 200 || code == fasthttp.StatusNoContent || code == fasthttp.StatusNotModified {
		return keep && br.Buffered() == 0, st, nil // no body
	}

	st = stageBody
	if err = conn.SetReadDeadline(deadline); err != nil {
		return false, st, err
	}
	err = readBody(br, resp, c.max, c.bodyRead)
	// Bytes beyond the answer mean the connection is out of step.
	return keep && err == nil && br.Buffered() == 0, st, err
}

// readBody reads resp's body from br, at most limit bytes: a larger
// Content-Length fails at once with fasthttp.ErrBodyTooLarge, as does the
// byte after limit of a chunked body or one that runs until the connection
// closes. The body is kept in a buffer that grows as its bytes arrive, never
// by what the receiver announced: fasthttp's own ReadBody makes a buffer of
// the whole Content-Length (or chunk size) before reading, so a receiver
// answering "Content-Length: 1048576", one byte and nothing more held 1 MiB
// per attempt for as long as the attempt lasted.
func readBody(br *bufio.Reader, resp *fasthttp.Response, limit int, onRead func()) error {
	var (
		src     io.Reader = br
		n                 = limit + 1 // read one byte more to notice the excess
		exact   bool
		chunked bool
	)
	switch cl := resp.Header.ContentLength(); {
	case cl > limit:
		return fasthttp.ErrBodyTooLarge
	case cl >= 0:
		n, exact = cl, true
	case cl == -1:
		src, chunked = httputil.NewChunkedReader(br), true
	}
	if onRead != nil {
		src = tracedReader{src, onRead}
	}
	// The response's own (pooled) body buffer, grown as needed.
	body, err := appendBody(resp.SwapBody(nil)[:0], src, n)
	resp.SwapBody(body)
	switch {
	case err == io.EOF && exact:
		return io.ErrUnexpectedEOF // the connection closed before the announced length
	case err != nil && err != io.EOF:
		return err
	case len(body) > limit:
		return fasthttp.ErrBodyTooLarge
	case chunked:
		return resp.Header.ReadTrailer(br) // the end of a chunked body
	}
	return nil
}

// tracedReader tells onRead of every read that brought bytes.
type tracedReader struct {
	io.Reader
	onRead func()
}

func (r tracedReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	if n > 0 {
		r.onRead()
	}
	return n, err
}

// bodyGrowth is the least a body buffer grows by at a time.
const bodyGrowth = 4 << 10

// appendBody appends to dst what r yields, until n bytes or an error (io.EOF
// at the end of the body). dst grows with what has arrived, doubling from
// bodyGrowth, and never beyond n more than it held: memory follows the bytes
// received, not the bytes announced.
func appendBody(dst []byte, r io.Reader, n int) ([]byte, error) {
	for n > 0 {
		if len(dst) == cap(dst) {
			dst = slices.Grow(dst, min(n, max(len(dst), bodyGrowth)))
		}
		m, err := r.Read(dst[len(dst):min(cap(dst), len(dst)+n)])
		dst, n = dst[:len(dst)+m], n-m
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// maxInterim is how many interim (1xx) responses may come before the final
// one, as in net/http.
const maxInterim = 5

var errInterim = errors.New("too many interim (1xx) responses")

// readHeader reads the header of the final response: interim ones other
// than 101 Switching Protocols are skipped.
func readHeader(h *fasthttp.ResponseHeader, br *bufio.Reader) error {
	for range maxInterim + 1 {
		if err := h.Read(br); err != nil {
			return err
		}
		if code := h.StatusCode(); code < 100 || code > 199 || code == fasthttp.StatusSwitchingProtocols {
			return nil
		}
	}
	return errInterim
}

// statusOK reports whether body is a JSON object whose "status" member (that
// exact name; the last one, if it is repeated) is the string "ok". It reads
// the body as a stream of tokens, with no map or value built for members it
// skips, and accepts what a full decode into a map would: invalid UTF-8 in
// a string, repeated names. Anything after the object but white space fails.
func statusOK(body []byte) bool {
	sd := statusDecoders.Get().(*statusDecoder)
	defer func() {
		sd.r.Reset(nil) // keep no hold on body
		statusDecoders.Put(sd)
	}()
	sd.r.Reset(body)
	d := &sd.d
	d.Reset(&sd.r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	ok := false
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return false
		}
		if name.String() != "status" {
			if d.SkipValue() != nil {
				return false
			}
			continue
		}
		v, err := d.ReadValue()
		if err != nil {
			return false
		}
		ok = v.Kind() == '"' && isOKString(v)
	}
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '}' {
		return false
	}
	_, err := d.ReadToken()
	return ok && err == io.EOF
}

// statusDecoder is a reusable decoder for statusOK: a new one costs more
// than the reading.
type statusDecoder struct {
	r bytes.Reader
	d jsontext.Decoder
}

var statusDecoders = sync.Pool{New: func() any { return new(statusDecoder) }}

// isOKString reports whether v, a JSON string, is "ok", escapes decoded.
func isOKString(v jsontext.Value) bool {
	if string(v) == `"ok"` {
		return true
	}
	s, err := jsontext.AppendUnquote(nil, v)
	return err == nil && string(s) == "ok"
}

// classify maps the error that ended an attempt to a stable, body-free
// Attempt.Error.
func classify(err error) string {
	st := stageConnect // errors of fasthttp itself come before any connection
	var ae *attemptError
	if errors.As(err, &ae) {
		st = ae.stage
	}
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		unkErr  x509.UnknownAuthorityError
		hostErr x509.HostnameError
		recErr  tls.RecordHeaderError
	)
	connected := st != stageConnect
	switch {
	case errors.Is(err, ErrRefused):
		return errGuard
	case errors.Is(err, context.Canceled): // only ever the attempt's ctx
		return errCanceled
	case isTimeout(err):
		if connected {
			return errTimeout
		}
		return errConnTimeout
	case st == stageBody:
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return errTooLarge
		}
		return errRead
	case st == stageHeader: // malformed, too large, cut short
		return errRequest
	case errors.As(err, &dnsErr):
		return errDNS
	case errors.As(err, &certErr) || errors.As(err, &unkErr) || errors.As(err, &hostErr):
		return errTLSCert
	case errors.As(err, &recErr) && string(recErr.RecordHeader[:]) != "HTTP/":
		// A plain HTTP answer to https is errConnect, as it was with net/http.
		return errTLS
	case errors.Is(err, syscall.ECONNREFUSED):
		return errConnRefused
	case errors.Is(err, syscall.ECONNRESET):
		return errConnReset
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return errConnClosed
	case !connected:
		return errConnect
	}
	return errRequest
}

// isTimeout reports whether err is a deadline passing, including waiting in
// vain for a free connection (fasthttp.ErrNoFreeConns).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fasthttp.ErrNoFreeConns) ||
		errors.As(err, &t) && t.Timeout()
}
