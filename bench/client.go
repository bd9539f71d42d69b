package bench

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/signature"
)

// Merchant API operations (contract section 1), appended to {target}/api/v3/.
const (
	opCharge = "charge"
	opSettle = "settle"
	opVoid   = "void"
	opRefund = "refund"
	opStatus = "status"
	// opListOrders is the merchant's order search (docs/back-office.md).
	opListOrders = "list-orders"
)

// client sends signed requests to one node over a fasthttp HostClient. It is
// safe for concurrent use: every call acquires its own request and response.
type client struct {
	base    string
	hc      *fasthttp.HostClient
	pk      string
	key     *signature.Key // keyed HMAC states, pooled: no key schedule per request
	timeout time.Duration
	uris    map[string]string // operation → absolute URI, built once
	// completed counts the requests answered or failed, for the CPU per
	// request (processcpu.go).
	completed atomic.Int64
}

func newClient(target, pk, sk string, conns int, timeout time.Duration) (*client, error) {
	base, hostPort, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	c := &client{
		base: base,
		hc: &fasthttp.HostClient{
			Addr:                hostPort,
			Name:                "gatewaybench",
			MaxConns:            conns,
			MaxConnWaitTimeout:  timeout,
			MaxIdleConnDuration: time.Minute,
			MaxResponseBodySize: 4 << 20,
			// fasthttp retries an idempotent request (the ceiling's GET)
			// up to 5 times by default, which would hide its failures.
			MaxIdemponentCallAttempts: 1,
		},
		pk: pk, key: signature.NewKey(pk, sk), timeout: timeout,
		uris: map[string]string{"healthz": base + "/healthz"},
	}
	for _, op := range []string{opCharge, opSettle, opVoid, opRefund, opStatus, opListOrders} {
		c.uris[op] = base + "/api/v3/" + op
	}
	return c, nil
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// answer is what one request produced.
type answer struct {
	status      int    // HTTP status; 0 when the request failed below HTTP
	kind        string // transport failure kind (timeout, connection, ...); "" when an HTTP answer arrived
	code        string // error.code of a non-200 answer (see errorCode)
	orderStatus string // the order's status in a 200 answer, when asked for
	// settled and refunded are the order's amounts in a 200 answer, when
	// its status was asked for.
	settled, refunded int64
	// listed is how many orders a 200 list-orders answer holds.
	listed int
}

func (a answer) ok() bool { return a.status == fasthttp.StatusOK }

// post sends a signed POST of body to the operation. A 200 answer must name
// orderID (when given): one that does not is counted as a failure,
// "answer_without_the_order", whatever its status. With wantStatus the
// order status of a 200 answer is decoded too.
func (c *client) post(op string, body []byte, orderID string, wantStatus bool) answer {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.uris[op])
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("merchant", c.pk)
	req.Header.Set("signature", c.key.Sign(body))
	req.SetBodyRaw(body)
	a := c.do(req, resp, wantStatus)
	if a.ok() && orderID != "" && !bytes.Contains(resp.Body(), []byte(orderID)) {
		return answer{kind: "answer_without_the_order"}
	}
	if a.ok() && op == opListOrders {
		// Each order of the page names its order_id once (the status view).
		a.listed = bytes.Count(resp.Body(), []byte(`"order_id":`))
	}
	return a
}

// get sends an unsigned GET to a path of the operations side (healthz).
func (c *client) get(name string) answer {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.uris[name])
	req.Header.SetMethod(fasthttp.MethodGet)
	return c.do(req, resp, false)
}

func (c *client) do(req *fasthttp.Request, resp *fasthttp.Response, wantStatus bool) answer {
	err := c.hc.DoTimeout(req, resp, c.timeout)
	c.completed.Add(1)
	if err != nil {
		return answer{kind: transportKind(err)}
	}
	a := answer{status: resp.StatusCode()}
	switch {
	case !a.ok():
		a.code = errorCode(resp.Body())
	case wantStatus:
		a.orderStatus, a.settled, a.refunded = orderState(resp.Body())
	}
	return a
}

// transportKind names a request failure below HTTP, for the error counts.
func transportKind(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no_free_conns"
	case errors.Is(err, fasthttp.ErrConnectionClosed), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_closed"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		if opErr.Op == "dial" {
			return "connect"
		}
		return "connection"
	}
	return "transport"
}

// errorCode reads error.code from an error body (contract section 3); a body
// without one is "none", one that is not JSON is "unparsed".
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return "unparsed"
	}
	if e.Error.Code == "" {
		return "none"
	}
	return e.Error.Code
}

// orderState reads the status and the settled and refunded amounts of an
// order object ("" for the status of a body it cannot read).
func orderState(body []byte) (status string, settled, refunded int64) {
	var o struct {
		Status   string `json:"status"`
		Settled  int64  `json:"settled_amount"`
		Refunded int64  `json:"refunded_amount"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return "", 0, 0
	}
	return o.Status, o.Settled, o.Refunded
}

// Request bodies. They are built by appending fixed pieces, not by
// marshalling, so that the harness spends its CPU on the wire and not on
// reflection; order ids and callback URLs are plain ASCII and need no escaping.

const (
	chargeAmount = 1020
	refundAmount = chargeAmount / 2
	// approvedCard is approved by the sandbox acquirer (contract section 7).
	approvedCard = "4111111111111111"
)

// appendChargeBody is a charge of order orderID by customer number
// customer (user u<customer>, e-mail u<customer>@example.com).
func appendChargeBody(dst []byte, orderID, callbackURL string, customer int) []byte {
	dst = append(dst, `{"order_id":"`...)
	dst = append(dst, orderID...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, chargeAmount, 10)
	dst = append(dst, `,"currency":"USD","order_description":"bench","processing_mid":"bench-mid",`+
		`"settle":{"delay_hours":24},"customer":{"user_id":"u`...)
	dst = strconv.AppendInt(dst, int64(customer), 10)
	dst = append(dst, `","email":"`...)
	dst = appendCustomerEmail(dst, customer)
	dst = append(dst, `","ip_address":"127.0.0.1"},`+
		`"payment_source":{"type":"card","card_number":"`+approvedCard+`","card_holder_name":"Bench User",`+
		`"card_exp_month":"12","card_exp_year":"2035","card_cvv":"123"}`...)
	if callbackURL != "" {
		dst = append(dst, `,"callback_url":"`...)
		dst = append(dst, callbackURL...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

func appendCustomerEmail(dst []byte, customer int) []byte {
	dst = append(dst, 'u')
	dst = strconv.AppendInt(dst, int64(customer), 10)
	return append(dst, "@example.com"...)
}

// appendSearchBody is a list-orders page of customer's orders.
func appendSearchBody(dst []byte, customer int) []byte {
	dst = append(dst, `{"email":"`...)
	dst = appendCustomerEmail(dst, customer)
	dst = append(dst, `","limit":`...)
	dst = strconv.AppendInt(dst, searchPage, 10)
	return append(dst, '}')
}

func appendAmountBody(dst []byte, orderID string, amount int64) []byte {
	dst = append(dst, `{"order_id":"`...)
	dst = append(dst, orderID...)
	dst = append(dst, `","amount":`...)
	dst = strconv.AppendInt(dst, amount, 10)
	return append(dst, '}')
}

func appendStatusBody(dst []byte, orderID string) []byte {
	dst = append(dst, `{"order_id":"`...)
	dst = append(dst, orderID...)
	return append(dst, `"}`...)
}
