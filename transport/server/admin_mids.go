package server

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
)

// Processing MIDs (contract 12): POST /admin/v1/mids registers one through
// the log, GET /admin/v1/mids[?merchant_id=] lists them from this node's
// applied state. A MID is never changed once registered (its orders'
// movements must reach the host that authorised them): the same
// registration again answers 200 with the record, another one for the
// same MID is 409 5.06.

// midMax is the longest MID: field 42 (card acceptor id) is ans15.
const midMax = 15

// midCurrenciesMax bounds a MID's currencies (ISO 4217 has fewer).
const midCurrenciesMax = 300

type midRequest struct {
	MID          string   `json:"mid"`
	MerchantID   string   `json:"merchant_id"`
	AcquirerAddr string   `json:"acquirer_addr"`
	Currencies   []string `json:"currencies"`
}

// MIDView is a registered MID as the admin API shows it.
type MIDView struct {
	MID          string   `json:"mid"`
	MerchantID   string   `json:"merchant_id"`
	AcquirerAddr string   `json:"acquirer_addr"`
	Currencies   []string `json:"currencies"`
	RegisteredAt string   `json:"registered_at"`
}

func midView(m *command.MID) MIDView {
	return MIDView{MID: m.MID, MerchantID: m.MerchantID, AcquirerAddr: m.AcquirerAddr, Currencies: m.Currencies,
		RegisteredAt: time.Unix(0, m.RegisteredAt).UTC().Format(time.RFC3339Nano)}
}

func (s *Server) serveMIDs(ctx *fasthttp.RequestCtx) {
	switch {
	case ctx.IsGet():
		list := s.cfg.Store.MIDs(string(ctx.QueryArgs().Peek("merchant_id")))
		out := struct {
			MIDs []MIDView `json:"mids"`
		}{MIDs: make([]MIDView, len(list))}
		for i := range list {
			out.MIDs[i] = midView(&list[i])
		}
		writeJSON(ctx, 200, out)
	case ctx.IsPost():
		s.registerMID(ctx)
	default:
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to list MIDs or POST to register one"))
	}
}

func (s *Server) registerMID(ctx *fasthttp.RequestCtx) {
	var req midRequest
	if err := json.Unmarshal(ctx.PostBody(), &req, json.RejectUnknownMembers(true)); err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body",
			"body must be a JSON object with mid, merchant_id, acquirer_addr and currencies, and nothing else"))
		return
	}
	ctx.SetUserValue(auditTargetKey, "mid:"+req.MID)
	if verr := s.checkMID(&req); verr != nil {
		writeError(ctx, verr)
		return
	}
	rec := &command.MID{MID: req.MID, MerchantID: req.MerchantID, AcquirerAddr: req.AcquirerAddr,
		Currencies: req.Currencies, RegisteredAt: s.cfg.Now().UnixNano()}
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{MID: rec})
	if err == nil {
		err = res.Err
	}
	switch {
	case errors.Is(err, persistence.ErrUnknownMerchant):
		writeError(ctx, apierr.New(apierr.Invalid, "merchant_id", "merchant_id should name an existing merchant"))
	case errors.Is(err, persistence.ErrMIDTaken):
		writeError(ctx, apierr.New(apierr.Conflict, "mid",
			"mid is already registered with another merchant, host or currencies; a MID cannot be changed"))
	case err != nil:
		writeError(ctx, s.errorFor("register mid", err))
	default:
		writeJSON(ctx, 200, midView(res.MID))
	}
}

// checkMID validates a registration, listing every field at fault: 2.03
// when only currencies are not ISO 4217 codes (as a charge's currency),
// else 2.01. It upper-cases and sorts the currencies, so the same set
// registers the same record however it was written.
func (s *Server) checkMID(req *midRequest) *apierr.Error {
	e := &apierr.Error{Code: apierr.Invalid}
	onlyCurrency := true
	fail := func(attr, msg string) {
		e.Add(attr, msg)
		onlyCurrency = false
	}
	switch {
	case req.MID == "":
		fail("mid", "mid is required")
	case len(req.MID) > midMax || !midChars(req.MID):
		fail("mid", "mid should have 1 to 15 characters: letters, digits, '-', '_' or '.' (it is ISO 8583 field 42)")
	}
	switch {
	case req.MerchantID == "":
		fail("merchant_id", "merchant_id is required")
	default:
		if m, err := s.cfg.Store.Merchant(req.MerchantID); err != nil || m == nil {
			fail("merchant_id", "merchant_id should name an existing merchant")
		}
	}
	if msg := checkAcquirerAddr(req.AcquirerAddr); msg != "" {
		fail("acquirer_addr", msg)
	}
	switch {
	case len(req.Currencies) == 0:
		fail("currencies", "currencies should list at least one ISO-4217 code")
	case len(req.Currencies) > midCurrenciesMax:
		fail("currencies", "currencies should list at most "+strconv.Itoa(midCurrenciesMax)+" codes")
	default:
		for i, c := range req.Currencies {
			up := strings.ToUpper(c)
			if !currency.Known(up) {
				e.Add("currencies", "currency "+strconv.Quote(c)+" is not an ISO-4217 currency code")
				continue
			}
			req.Currencies[i] = up
		}
		if len(e.Messages["currencies"]) == 0 {
			slices.Sort(req.Currencies)
			if len(slices.Compact(slices.Clone(req.Currencies))) != len(req.Currencies) {
				fail("currencies", "currencies should name each currency once")
			}
		}
	}
	if len(e.Messages) == 0 {
		return nil
	}
	if onlyCurrency {
		e.Code = apierr.CurrencyInvalid
	}
	return e
}

// midChars reports whether a MID has only the characters it may have.
func midChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// checkAcquirerAddr answers why addr is not a host:port the link can
// dial, or "".
func checkAcquirerAddr(addr string) string {
	const want = "acquirer_addr should be host:port (a host name or IP address and a port from 1 to 65535)"
	if addr == "" {
		return "acquirer_addr is required"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || len(addr) > 255 {
		return want
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return want
	}
	if net.ParseIP(host) != nil {
		return ""
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return want
		}
	}
	return ""
}
