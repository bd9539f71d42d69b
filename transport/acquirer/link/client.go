// Package link is the node's connection to an acquirer host over ISO 8583
// (contract section 12): one persistent TCP connection, STAN allocation,
// answers matched to requests by STAN, a 0800 echo when the line is idle,
// reconnection with backoff, and a timeout per request. Acquirer puts the
// order actors' acquirer (actors.Acquirer) on top of it.
//
// Concurrency: a Client is safe for concurrent use; any number of requests
// share the connection, each waiting for its own answer. A request's
// answer comes on the connection it went out on: when the connection
// drops, the requests waiting on it fail at once with ErrConnectionLost
// (the host may or may not have decided them) and the caller repeats them
// with the same RRN, which the host answers with its first answer.
//
// Card data: requests carry the card number and CVV; this package never
// logs a message (iso8583.Message.Dump is the only text form, and it masks
// them) and keeps nothing after the answer.
package link

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// Config configures a Client.
type Config struct {
	Addr     string        // the acquirer host, host:port
	Timeout  time.Duration // bounds one request's answer; default 10s
	EchoIdle time.Duration // send an 0800 echo after this long without traffic; default 30s
	Logger   *slog.Logger
	Now      func() time.Time // default time.Now
	// TLS, when set, makes the connection TLS (ClientTLS): the host's
	// certificate is checked against its roots and the host of Addr
	// (unless TLS.ServerName names another). Nil: plain TCP.
	TLS *tls.Config
	// Dial opens the connection; default a TCP dial (then the TLS
	// handshake when TLS is set) bounded by 5s.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// Errors of Do. Each means no answer came: the caller may repeat the
// request with the same RRN.
var (
	ErrTimeout        = errors.New("acquirer link: no answer within the timeout")
	ErrConnectionLost = errors.New("acquirer link: connection lost before the answer")
	ErrClosed         = errors.New("acquirer link: closed")
	// ErrOverloaded: pendingMax requests already wait for their answers.
	ErrOverloaded = errors.New("acquirer link: too many requests waiting for answers")
	// ErrSTANBusy: DoKeepingSTAN's request has a STAN another request
	// waiting on the line has; repeat it once that one is answered.
	ErrSTANBusy = errors.New("acquirer link: the request's STAN is waiting for another answer")
)

// pendingMax bounds the requests waiting for answers on one link (STANs
// are 6 digits, and a host that stops answering must not grow the node's
// memory without end).
const pendingMax = 10_000

// Client is a persistent connection to one acquirer host.
type Client struct {
	cfg Config

	mu      sync.Mutex
	conn    net.Conn      // nil while disconnected
	up      chan struct{} // closed when conn is set; replaced when it drops
	pending map[string]*call
	stan    uint32

	writer *iso8583.FrameWriter // of conn

	lastTraffic atomic.Int64 // Unix ns of the last frame either way
	closed      chan struct{}
	closeOnce   sync.Once
	done        chan struct{} // the connection loop has ended
}

type call struct {
	mti    string
	answer chan *iso8583.Message
}

// Dial starts the connection loop and returns at once: requests wait for
// the connection (within their timeout) while it is being made.
func Dial(cfg Config) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.EchoIdle <= 0 {
		cfg.EchoIdle = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dial == nil {
		cfg.Dial = dialer(cfg.TLS)
	}
	c := &Client{cfg: cfg, up: make(chan struct{}), pending: map[string]*call{},
		closed: make(chan struct{}), done: make(chan struct{})}
	c.stan = rand.Uint32N(999_999) // a restarted node does not start again at 1
	go c.loop()
	return c
}

// Close ends the connection; waiting requests fail with ErrClosed.
func (c *Client) Close() {
	c.closeOnce.Do(func() { close(c.closed) })
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
	}
	c.mu.Unlock()
	<-c.done
}

// Connected reports whether the connection is up.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn != nil
}

// Timeout is the per-request timeout.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// NextSTAN allocates a systems trace audit number: 6 digits, 000001 to
// 999999 in turn, skipping any still waiting for an answer.
func (c *Client) NextSTAN() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextSTANLocked()
}

func (c *Client) nextSTANLocked() string {
	for {
		c.stan = c.stan%999_999 + 1
		var b [6]byte
		for i, v := 5, c.stan; i >= 0; i, v = i-1, v/10 {
			b[i] = byte('0' + v%10)
		}
		s := string(b[:])
		if c.pending[s] == nil {
			return s
		}
	}
}

// Do sends req and returns its answer. Field 11 (STAN) is allocated when
// req has none, or when the one it has is waiting for another answer; field
// 7 (transmission time) is set when missing. The answer must carry the
// matching response MTI (0100 → 0110) and STAN; anything else on the line
// (a duplicate, a late answer to a timed-out request) is counted and
// dropped. Do waits at most the client's timeout (then ErrTimeout), or
// less if ctx ends first (then ctx's error).
func (c *Client) Do(ctx context.Context, req *iso8583.Message) (*iso8583.Message, error) {
	return c.do(ctx, req, false)
}

// DoKeepingSTAN is Do for a request that must keep its STAN: a money
// movement, whose STAN and field 7 the host knows its repeats by. When a
// request waiting on the line has the STAN it waits for that one's answer
// (within the timeout; then ErrSTANBusy) instead of taking another.
func (c *Client) DoKeepingSTAN(ctx context.Context, req *iso8583.Message) (*iso8583.Message, error) {
	return c.do(ctx, req, true)
}

func (c *Client) do(ctx context.Context, req *iso8583.Message, keepSTAN bool) (*iso8583.Message, error) {
	start := time.Now()
	// A timer rather than a context with a deadline, and a pooled one:
	// no allocation on a request.
	timeout := startTimer(c.cfg.Timeout)
	defer stopTimer(timeout)
	if !req.Has(iso8583.FieldTransmissionTime) {
		req.Set(iso8583.FieldTransmissionTime, iso8583.TransmissionTime(c.cfg.Now().UTC()))
	}
	cl := newCall(req.MTI)
	var conn net.Conn
	var writer *iso8583.FrameWriter
	for {
		c.mu.Lock()
		conn, writer = c.conn, c.writer
		up := c.up
		if conn != nil && len(c.pending) >= pendingMax {
			c.mu.Unlock()
			overloaded.Inc()
			return nil, ErrOverloaded
		}
		if conn != nil {
			stan := req.Value(iso8583.FieldSTAN)
			if keepSTAN && c.pending[stan] != nil {
				c.mu.Unlock()
				// Another request waits on this STAN (an authorisation's,
				// allocated in turn, or another movement's digest): wait
				// for its answer, checking every millisecond, rather than
				// tell a merchant "no answer yet" with no fault present.
				if _, _, err := await(ctx, c, timeout, req.MTI, time.After(time.Millisecond)); err != nil {
					if errors.Is(err, ErrTimeout) {
						return nil, ErrSTANBusy
					}
					return nil, err
				}
				continue
			}
			if !req.Has(iso8583.FieldSTAN) || c.pending[stan] != nil {
				stan = c.nextSTANLocked()
				req.Set(iso8583.FieldSTAN, stan)
			}
			c.pending[stan] = cl
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
		if _, _, err := await(ctx, c, timeout, req.MTI, up); err != nil {
			return nil, err
		}
	}
	stan := req.Value(iso8583.FieldSTAN)
	answered := false
	defer func() {
		c.mu.Lock()
		if c.pending[stan] == cl {
			delete(c.pending, stan)
		}
		c.mu.Unlock()
		if answered {
			// The reader took it out of pending and sent its one answer,
			// which was received: nothing else can touch it now.
			calls.Put(cl)
		}
	}()
	if err := c.write(writer, req); err != nil {
		var fe *iso8583.FieldError
		if errors.As(err, &fe) || errors.Is(err, iso8583.ErrMTI) {
			return nil, err // the request itself is wrong: repeating will not help
		}
		conn.Close() // the reader sees it and the loop reconnects
		return nil, ErrConnectionLost
	}
	ans, ok, err := await(ctx, c, timeout, req.MTI, cl.answer)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, ErrConnectionLost
	}
	answered = true
	roundTrip(req.MTI).UpdateDuration(start)
	return ans, nil
}

// calls holds answered calls for reuse. Only an answered one comes back:
// after a timeout the reader may still be about to send to it, and after a
// lost connection its channel is closed.
var calls sync.Pool

func newCall(mti string) *call {
	if cl, ok := calls.Get().(*call); ok {
		cl.mti = mti
		return cl
	}
	return &call{mti: mti, answer: make(chan *iso8583.Message, 1)}
}

// timers holds stopped request timers. Since Go 1.23 a stopped or reset
// timer delivers nothing stale, so one can serve request after request.
var timers sync.Pool

func startTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func stopTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// await receives from ch (ok false: ch was closed), unless the client
// closes, the request's timeout fires or ctx ends first.
func await[T any](ctx context.Context, c *Client, timeout *time.Timer, mti string, ch <-chan T) (v T, ok bool, err error) {
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-c.closed:
		return v, false, ErrClosed
	case <-timeout.C:
		timeouts(mti).Inc()
		return v, false, ErrTimeout
	case <-ctx.Done():
		return v, false, ctx.Err()
	}
}

func (c *Client) write(w *iso8583.FrameWriter, m *iso8583.Message) error {
	if err := w.Send(m); err != nil {
		return err
	}
	c.lastTraffic.Store(time.Now().UnixNano())
	return nil
}

// deadlineWriter bounds every write to the connection: a host that stops
// reading fails the write (and the connection) instead of blocking it.
type deadlineWriter struct {
	conn    net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(b []byte) (int, error) {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.conn.Write(b)
}

// loop keeps a connection up until Close: dial with backoff, read answers
// until the connection fails, fail what waited on it, again.
func (c *Client) loop() {
	defer close(c.done)
	backoff := backoffMin
	for {
		select {
		case <-c.closed:
			return
		default:
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		conn, err := c.cfg.Dial(ctx, c.cfg.Addr)
		cancel()
		if err != nil {
			connectFailures.Inc()
			c.cfg.Logger.Warn("acquirer link: connect failed", "addr", c.cfg.Addr, "error", err, "retry_in", backoff)
			select {
			case <-time.After(backoff + rand.N(backoff/2+1)):
			case <-c.closed:
				return
			}
			backoff = min(backoff*2, backoffMax)
			continue
		}
		backoff = backoffMin
		connects.Inc()
		c.setConn(conn)
		c.cfg.Logger.Info("acquirer link: connected", "addr", c.cfg.Addr)
		stopEcho := make(chan struct{})
		go c.echoWhenIdle(conn, stopEcho)
		c.read(conn)
		close(stopEcho)
		c.dropConn(conn)
	}
}

// dialer is the default Dial: TCP, then TLS when tlsCfg is set, the two
// bounded together by dialTimeout.
func dialer(tlsCfg *tls.Config) func(ctx context.Context, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout}
	if tlsCfg == nil {
		return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	td := &tls.Dialer{NetDialer: d, Config: tlsCfg}
	return func(ctx context.Context, addr string) (net.Conn, error) { return td.DialContext(ctx, "tcp", addr) }
}

const (
	dialTimeout = 5 * time.Second
	backoffMin  = 50 * time.Millisecond
	backoffMax  = 5 * time.Second
)

func (c *Client) setConn(conn net.Conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.closed:
		conn.Close()
		return
	default:
	}
	c.conn = conn
	c.writer = iso8583.NewFrameWriter(deadlineWriter{conn, c.cfg.Timeout})
	close(c.up)
	c.lastTraffic.Store(time.Now().UnixNano())
	connectionsUp.Add(1)
}

// dropConn marks the connection down and fails every request waiting on
// it: their answers cannot come on another connection.
func (c *Client) dropConn(conn net.Conn) {
	conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != conn {
		return
	}
	c.conn, c.writer = nil, nil
	c.up = make(chan struct{})
	connectionsUp.Add(-1)
	for stan, cl := range c.pending {
		close(cl.answer)
		delete(c.pending, stan)
	}
	c.cfg.Logger.Warn("acquirer link: connection lost", "addr", c.cfg.Addr)
}

// read delivers each answer to the request waiting for its STAN.
func (c *Client) read(conn net.Conn) {
	r := iso8583.NewFrameReader(conn)
	malformed := func(err error) {
		c.cfg.Logger.Warn("acquirer link: malformed answer dropped", "error", err)
		unmatchedAnswers.Inc()
	}
	for {
		m := messages.Get().(*iso8583.Message) // Authorize puts its answer back
		if err := r.NextInto(m, malformed); err != nil {
			return
		}
		c.lastTraffic.Store(time.Now().UnixNano())
		stan := m.Value(iso8583.FieldSTAN)
		c.mu.Lock()
		cl := c.pending[stan]
		if cl != nil && responseMTI(cl.mti) == m.MTI {
			delete(c.pending, stan)
		} else {
			cl = nil
		}
		c.mu.Unlock()
		if cl == nil {
			unmatchedAnswers.Inc() // a duplicate, or late after its timeout
			messages.Put(m)
			continue
		}
		cl.answer <- m
	}
}

// responseMTI is the answer's MTI for a request's: 0100 → 0110, and a
// repeat's last digit dropped (0221 → 0230).
func responseMTI(mti string) string {
	if len(mti) != 4 {
		return ""
	}
	return mti[:2] + string(mti[2]+1) + "0"
}

// echoWhenIdle sends an 0800 echo (field 70 = 301) when nothing crossed the
// line for EchoIdle, and closes the connection when the echo gets no
// answer, so a dead line is found before a payment needs it.
func (c *Client) echoWhenIdle(conn net.Conn, stop chan struct{}) {
	t := time.NewTicker(c.cfg.EchoIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-c.closed:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, c.lastTraffic.Load())) < c.cfg.EchoIdle {
			continue
		}
		if err := c.Echo(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			c.cfg.Logger.Warn("acquirer link: echo failed; reconnecting", "error", err)
			conn.Close()
		}
	}
}

// Echo sends an 0800 network management echo and checks its 0810 answer.
func (c *Client) Echo(ctx context.Context) error {
	ans, err := c.Do(ctx, iso8583.New("0800").Set(iso8583.FieldNetworkManagement, "301"))
	if err != nil {
		return err
	}
	if code := ans.Value(iso8583.FieldResponseCode); code != "00" {
		return fmt.Errorf("acquirer link: echo answered %q", code)
	}
	return nil
}

// Metrics (docs/cluster.md, "Metrics").
var (
	connectionsUp    = new(gaugeInt)
	_                = metrics.NewGauge(`gateway_acquirer_connections_up`, connectionsUp.value)
	connects         = metrics.NewCounter(`gateway_acquirer_connects_total`)
	connectFailures  = metrics.NewCounter(`gateway_acquirer_connect_failures_total`)
	unmatchedAnswers = metrics.NewCounter(`gateway_acquirer_unmatched_answers_total`)
	overloaded       = metrics.NewCounter(`gateway_acquirer_overloaded_total`)
)

// gaugeInt is an integer gauge: links connected in this process.
type gaugeInt struct{ atomic.Int64 }

func (g *gaugeInt) value() float64 { return float64(g.Load()) }

// roundTrips caches the histograms by MTI: the metric's name is built
// once, not on every answer.
var roundTrips sync.Map // MTI → *metrics.PrometheusHistogram

func roundTrip(mti string) *metrics.PrometheusHistogram {
	if h, ok := roundTrips.Load(mti); ok {
		return h.(*metrics.PrometheusHistogram)
	}
	h := metrics.GetOrCreatePrometheusHistogram(`gateway_acquirer_round_trip_seconds{mti="` + mti + `"}`)
	roundTrips.Store(mti, h)
	return h
}

func timeouts(mti string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`gateway_acquirer_timeouts_total{mti="` + mti + `"}`)
}

func init() {
	// Present from the start, so a dashboard shows 0 rather than nothing.
	for _, mti := range []string{"0100", "0200", "0800"} {
		roundTrip(mti)
		timeouts(mti)
	}
}
