package bench

import (
	"bytes"
	"context"
	"net"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/signature"
)

// createdAtHeader is the notification header docs/webhooks.md documents for
// a status change's time. The harness reads it as any merchant's receiver
// would, from the public contract, not from the gateway's webhook client
// (bench imports the public API only: internal/depcheck).
const createdAtHeader = "Notification-Created-At"

// webhookSink is the webhooks workload's notification receiver: a fasthttp
// server on 127.0.0.1 that answers every notification 200 {"status":"ok"}
// (contract section 6) and matches authorised notifications to the charges
// that caused them.
//
// The latency it records (operation "webhook") runs from the status change
// to the moment the notification saying "authorized" reached the receiver.
// The change's time is the notification's Notification-Created-At header
// (the node's clock, in nanoseconds: the harness must share the node's
// clock, as on one machine). A node that sends no such header is measured
// from the moment the charge's 200 answer reached the worker instead,
// which adds the authorisation's time; the report says which
// (WebhookReport.LatencyFrom). The body's updated_at has whole seconds only.
type webhookSink struct {
	ln  *trackingListener
	srv *fasthttp.Server
	url string

	pk  string         // webhook public key; empty means notifications are not verified
	key *signature.Key // pooled HMAC states for pk and its secret

	rec  *shard // records "webhook" for the window's charges; the run's stats own it
	warm *shard // counts the other charges' notifications that arrive in the window

	mu      sync.Mutex
	pending map[string]*pendingHook // order_id → charge answered and/or notification seen; kept once matched, to tell repeats
	// closed is set by report: the books are closed. The receiver still
	// answers what comes later (an interrupted run does not wait), but
	// counts none of it, which would make a charge the report called
	// undelivered a success of the webhook row too.
	closed bool
	// counts, under mu
	expected, delivered, received, duplicates, badSignature int64
	fromChange, fromAnswer                                  int64 // latencies recorded from each start
}

// pendingHook is one order between its charge answer and its notification.
// Either may come first: the node may notify before the worker has read the
// charge's answer.
type pendingHook struct {
	answered time.Time // charge answer read; zero until then
	arrived  time.Time // authorised notification received; zero until then
	changed  time.Time // the status change, from the notification's header; zero without one
	measured bool      // the charge was in the measured window
	matched  bool      // both seen and recorded
}

func startWebhookSink(pk, sk string, rec, warm *shard) (*webhookSink, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ln := &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}
	s := &webhookSink{ln: ln, pk: pk, key: signature.NewKey(pk, sk), rec: rec, warm: warm, pending: map[string]*pendingHook{}}
	s.url = "http://" + ln.Addr().String() + "/hook"
	s.srv = &fasthttp.Server{
		Handler:               s.handle,
		Name:                  "gatewaybench-hooks",
		ReadTimeout:           30 * time.Second,
		MaxRequestBodySize:    1 << 20,
		NoDefaultServerHeader: true,
	}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// close stops the receiver. Notifications still in flight are not wanted any
// more: after a short grace it closes every connection, including those a
// sender opened and never used, which fasthttp's Shutdown would wait 5 s for.
func (s *webhookSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = s.srv.ShutdownWithContext(ctx)
	s.ln.closeConns()
}

// trackingListener remembers its open connections so that they can be closed.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns[c] = struct{}{}
	l.mu.Unlock()
	return &trackedConn{Conn: c, l: l}, nil
}

func (l *trackingListener) closeConns() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Close()
	}
	clear(l.conns)
}

type trackedConn struct {
	net.Conn
	l *trackingListener
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c.Conn)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

var okBody = []byte(`{"status":"ok"}`)

func (s *webhookSink) handle(ctx *fasthttp.RequestCtx) {
	now := time.Now()
	body := ctx.PostBody()
	verified := s.pk == "" ||
		(string(ctx.Request.Header.Peek("merchant")) == s.pk &&
			s.key.Verify(body, ctx.Request.Header.Peek("signature")))
	// An unreadable body is answered ok too: nothing to match it to.
	orderID, status := notificationFields(body)
	var changed time.Time
	if h := ctx.Request.Header.Peek(createdAtHeader); len(h) > 0 {
		changed, _ = time.Parse(time.RFC3339Nano, string(h)) // zero when unreadable
	}
	s.notified(orderID, status, verified, now, changed)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(okBody)
}

// notificationDecoder reads the two members the sink needs; pooled, so
// its buffers are reused from one notification to the next.
type notificationDecoder struct {
	r bytes.Reader
	d jsontext.Decoder
}

var notificationDecoders = sync.Pool{New: func() any { return new(notificationDecoder) }}

// notificationFields reads a notification's order_id and status. The order
// view puts both among its first members (order/view_json.go), so reading
// stops there instead of decoding the whole body: decoding it all was ~6 %
// of the harness under the webhooks workload, CPU the node it measures
// shares. A body it cannot read to both gives what it found ("" if none).
func notificationFields(body []byte) (orderID, status string) {
	nd := notificationDecoders.Get().(*notificationDecoder)
	defer func() {
		nd.r.Reset(nil) // keep no hold on body
		notificationDecoders.Put(nd)
	}()
	nd.r.Reset(body)
	d := &nd.d
	d.Reset(&nd.r)
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", ""
	}
	for (orderID == "" || status == "") && d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return orderID, status
		}
		key := name.String()
		if key != "order_id" && key != "status" {
			if d.SkipValue() != nil {
				return orderID, status
			}
			continue
		}
		v, err := d.ReadToken()
		if err != nil || v.Kind() != '"' {
			return orderID, status
		}
		if key == "order_id" {
			orderID = v.String()
		} else {
			status = v.String()
		}
	}
	return orderID, status
}

func (s *webhookSink) notified(orderID, status string, verified bool, at, changed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.received++
	if !verified {
		s.badSignature++
		// An error of the window's from its start on: the warmup is
		// not recorded.
		if !at.Before(s.rec.stats.start) {
			s.rec.failKind("webhook", "webhook_bad_signature")
		}
	}
	if status != "authorized" || orderID == "" {
		return
	}
	p := s.pending[orderID]
	switch {
	case p == nil:
		s.pending[orderID] = &pendingHook{arrived: at, changed: changed} // before its charge answer
	case !p.arrived.IsZero():
		s.duplicates++ // at-least-once delivery: a repeat
	default:
		p.arrived, p.changed = at, changed
		s.match(p)
	}
}

// expect registers an acknowledged charge whose notification is awaited.
func (s *webhookSink) expect(orderID string, answered time.Time, measured bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if measured {
		s.expected++
	}
	p := s.pending[orderID]
	if p == nil {
		s.pending[orderID] = &pendingHook{answered: answered, measured: measured}
		return
	}
	p.answered, p.measured = answered, measured
	s.match(p)
}

// match records a pair of charge answer and notification. Called with mu held.
func (s *webhookSink) match(p *pendingHook) {
	p.matched = true
	var d time.Duration
	if p.changed.IsZero() {
		d = p.arrived.Sub(p.answered)
	} else {
		d = p.arrived.Round(0).Sub(p.changed) // wall clocks: the node's and the harness's
	}
	if d < 0 {
		d = 0 // notified before the answer was read, or clocks a little apart
	}
	if !p.measured {
		s.warm.okAt("webhook", d, p.arrived)
		return
	}
	s.delivered++
	if p.changed.IsZero() {
		s.fromAnswer++
	} else {
		s.fromChange++
	}
	s.rec.okAt("webhook", d, p.arrived)
}

// outstanding counts measured charges still waiting for their notification.
func (s *webhookSink) outstanding() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expected - s.delivered
}

// wait returns once every measured charge has its notification, ctx ends, or
// max has passed; it polls every 10 ms.
func (s *webhookSink) wait(ctx context.Context, max time.Duration) {
	deadline := time.Now().Add(max)
	for s.outstanding() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// report closes the books: every measured charge still without notification
// is counted undelivered, every authorised notification without a charge
// answer of this run unmatched.
//
// The rate is of notifications that arrived inside the window (from start,
// window long: shorter if the run ended early), whichever charge they are
// for. Dividing everything delivered for the window's charges by the window
// would count the notifications that arrived during the wait after it:
// when the node charges faster than it delivers, a backlog builds up and
// that figure reports the charge rate, not the delivery rate.
func (s *webhookSink) report(start time.Time, window time.Duration) *WebhookReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	r := &WebhookReport{
		CallbackURL: s.url, Expected: s.expected, Delivered: s.delivered,
		Received: s.received, Duplicates: s.duplicates, BadSignature: s.badSignature,
	}
	switch {
	case s.fromChange > 0 && s.fromAnswer > 0:
		r.LatencyFrom = "mixed"
	case s.fromChange > 0:
		r.LatencyFrom = "status_change"
	case s.fromAnswer > 0:
		r.LatencyFrom = "charge_answer"
	}
	end := start.Add(window)
	for _, p := range s.pending {
		switch {
		case p.answered.IsZero():
			r.Unmatched++
		case p.measured && !p.matched:
			r.Undelivered++
			s.rec.failKind("webhook", "webhook_undelivered")
		}
		if p.matched && !p.arrived.Before(start) && p.arrived.Before(end) {
			r.DeliveredInWindow++
		}
	}
	if secs := window.Seconds(); secs > 0 {
		r.DeliveredPerSec = float64(r.DeliveredInWindow) / secs
	}
	return r
}
