package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paygate/gateway/transport/signature"
)

// Defaults for zero Config fields.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultResponseTimeout  = 10 * time.Second
	DefaultMaxResponseBytes = 4 << 10
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
	Secret    string // webhook secret key, used only to sign
}

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
	hc      *http.Client
	tr      *http.Transport
	ua      string
	max     int64
	timeout time.Duration // whole attempt: ConnectTimeout + ResponseTimeout
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
	g := cfg.Guard
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		// Never a proxy from the environment: the guard must see, and
		// connect to, the real destination.
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			return g.dial(ctx, dialer, network, address)
		},
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.ResponseTimeout,
		ForceAttemptHTTP2:      true, // a custom DialContext disables HTTP/2 otherwise
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    64, // many notifications often go to one receiver
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		DisableCompression:     true, // read the body as sent; no decompression work
	}
	return &Client{
		hc: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a 3xx is a failed attempt
			},
		},
		tr:      tr,
		ua:      cfg.UserAgent,
		max:     cfg.MaxResponseBytes,
		timeout: cfg.ConnectTimeout + cfg.ResponseTimeout,
	}
}

// CloseIdleConnections closes kept-alive connections not in use.
func (c *Client) CloseIdleConnections() { c.tr.CloseIdleConnections() }

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
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(d.Body))
	if err != nil {
		return Attempt{Error: errInvalidURL}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("merchant", d.PublicKey)
	req.Header.Set("signature", signature.Sign(d.PublicKey, d.Secret, d.Body))

	resp, err := c.hc.Do(req)
	if err != nil {
		return Attempt{Error: classify(ctx, err, connected.Load())}
	}
	defer resp.Body.Close()
	a := Attempt{HTTPCode: resp.StatusCode}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Error = errRedirectStart + strconv.Itoa(resp.StatusCode) + ")"
	case resp.StatusCode != http.StatusOK:
		a.Error = errStatusPrefix + strconv.Itoa(resp.StatusCode)
	}
	body, tooLarge, err := readLimited(resp.Body, c.max)
	switch {
	case a.Error != "":
		// Not delivered whatever the body says. It was read (up to the limit)
		// only so the connection can be reused.
	case err != nil:
		a.Error = errRead
		if e := classify(ctx, err, true); e == errTimeout || e == errCanceled {
			a.Error = e
		}
	case tooLarge:
		a.Error = errTooLarge
	case !statusOK(body):
		a.Error = errNotOK
	default:
		a.Delivered = true
	}
	return a
}

// readLimited reads at most max+1 bytes of r: the body if it fits in max
// bytes, or tooLarge. A body that fits has been read to EOF, which lets the
// transport reuse the connection; a larger one is abandoned (closing it drops
// the connection) rather than drained.
func readLimited(r io.Reader, max int64) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > max {
		return nil, true, nil
	}
	return body, false, nil
}

// statusOK reports whether body is a JSON object whose "status" member (that
// exact name) is the string "ok".
func statusOK(body []byte) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return false
	}
	raw, ok := m["status"]
	if !ok {
		return false
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == "ok"
}

// classify maps a transport error to a stable, body-free Attempt.Error.
func classify(ctx context.Context, err error, connected bool) string {
	var (
		dnsErr  *net.DNSError
		certErr *tls.CertificateVerificationError
		unkErr  x509.UnknownAuthorityError
		hostErr x509.HostnameError
		recErr  tls.RecordHeaderError
		netErr  net.Error
	)
	switch {
	case errors.Is(err, ErrRefused):
		return errGuard
	case errors.Is(err, context.Canceled) && ctx.Err() == context.Canceled:
		return errCanceled
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		if connected {
			return errTimeout
		}
		return errConnTimeout
	case errors.As(err, &dnsErr):
		return errDNS
	case errors.As(err, &certErr) || errors.As(err, &unkErr) || errors.As(err, &hostErr):
		return errTLSCert
	case errors.As(err, &recErr):
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
