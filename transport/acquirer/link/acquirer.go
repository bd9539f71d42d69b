package link

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// Acquirer is what the order actors call (as actors.Acquirer) over a link: an
// authorisation is an 0100, a sale (settle.delay_hours 0) an 0200. The
// BIN lookup and 3-D Secure enrolment are not acquirer messages; they come
// from the sandbox directory tables.
type Acquirer struct {
	acquirer.SandboxDirectory
	client     *Client
	terminalID string

	mu    sync.Mutex
	stans map[string]string // reference → STAN of its unanswered attempt, so a repeat keeps it
}

// unansweredMax bounds the STANs kept for repeats: an outage must not grow
// the node's memory with every payment that failed in it.
const unansweredMax = 10_000

// TerminalID is field 41 of the gateway's messages unless told otherwise.
const TerminalID = "PAYGATE1"

// NewAcquirer puts an Acquirer on client.
func NewAcquirer(client *Client) *Acquirer {
	// Every movement series exists from the start at 0, so a dashboard
	// or an alert reads 0 rather than nothing before the first movement.
	for _, mti := range []string{"0220", "0221", "0400", "0401", "0200"} {
		movesSent(mti)
	}
	return &Acquirer{client: client, terminalID: TerminalID, stans: map[string]string{}}
}

// Client is the link the Acquirer speaks over.
func (a *Acquirer) Client() *Client { return a.client }

// Authorize sends the authorisation (or sale) and reads the answer through
// the response code table. Every attempt for a reference carries the same
// RRN (acquirer.RRN), and the same STAN while it is unanswered, so the host
// answers a repeat with its first answer and authorises once. An error is
// the link's (no answer in time, connection lost): repeat with the same
// reference.
func (a *Acquirer) Authorize(ctx context.Context, req acquirer.AuthRequest) (acquirer.AuthResult, error) {
	if req.Reference == "" {
		return acquirer.AuthResult{}, acquirer.ErrNoReference
	}
	msg, err := a.message(req)
	if err != nil {
		return acquirer.AuthResult{}, err
	}
	// Do packed msg before it returned, and result copies nothing out of
	// an answer but strings: both are done with when this returns.
	defer messages.Put(msg)
	a.mu.Lock()
	if stan, ok := a.stans[req.Reference]; ok {
		msg.Set(iso8583.FieldSTAN, stan)
	}
	a.mu.Unlock()
	ans, err := a.client.Do(ctx, msg)
	a.mu.Lock()
	if err != nil && msg.Has(iso8583.FieldSTAN) {
		if len(a.stans) >= unansweredMax {
			// A long outage: forget one. Its repeat takes a new STAN;
			// the host still knows it by its RRN.
			for ref := range a.stans {
				delete(a.stans, ref)
				break
			}
		}
		a.stans[req.Reference] = msg.Value(iso8583.FieldSTAN)
	} else {
		delete(a.stans, req.Reference)
	}
	a.mu.Unlock()
	if err != nil {
		return acquirer.AuthResult{}, err
	}
	defer messages.Put(ans)
	if ans.Value(iso8583.FieldRRN) != msg.Value(iso8583.FieldRRN) {
		return acquirer.AuthResult{}, fmt.Errorf("acquirer link: answer for RRN %q to a request of RRN %q",
			ans.Value(iso8583.FieldRRN), msg.Value(iso8583.FieldRRN))
	}
	return result(ans), nil
}

// Forget drops what the Acquirer remembers of an unanswered reference (its
// STAN), once the caller gives up repeating it.
func (a *Acquirer) Forget(reference string) {
	a.mu.Lock()
	delete(a.stans, reference)
	a.mu.Unlock()
}

// messages keeps authorisations' requests and answers for reuse (two
// allocations fewer each): a message's values are strings, which stay
// valid when the message is reused.
var messages = sync.Pool{New: func() any { return new(iso8583.Message) }}

// result reads an 0110/0210 answer.
func result(ans *iso8583.Message) acquirer.AuthResult {
	code := ans.Value(iso8583.FieldResponseCode)
	row := acquirer.ResponseFor(code)
	f48 := ans.Value(iso8583.FieldAdditionalData)
	avs, ok := iso8583.LookupTLV(f48, iso8583.TagAVSResult)
	if !ok {
		avs = acquirer.AVSUnavailable
	}
	cvv, ok := iso8583.LookupTLV(f48, iso8583.TagCVVResult)
	if !ok {
		cvv = acquirer.CVVNotProcessed
	}
	r := acquirer.AuthResult{AVSCheck: avs, CVVCheck: cvv, RiskDecision: row.Risk,
		Trace: ans.Value(iso8583.FieldSTAN) + ans.Value(iso8583.FieldTransmissionTime)}
	if code == acquirer.RespApproved {
		r.Approved = true
		r.AuthCode = ans.Value(iso8583.FieldAuthCode)
		r.ARN, _ = iso8583.LookupTLV(f48, iso8583.TagARN)
		return r
	}
	r.DeclineCode, r.DeclineMessage = row.Decline, row.Message
	return r
}

// message builds the 0100 (or 0200) for req; the STAN and transmission
// time are the client's.
func (a *Acquirer) message(req acquirer.AuthRequest) (*iso8583.Message, error) {
	mti := "0100"
	if req.Sale {
		mti = "0200"
	}
	cur, ok := currency.Lookup(req.Currency)
	if !ok {
		return nil, fmt.Errorf("%w: currency %q has no ISO 4217 number", acquirer.ErrInvalidRequest, req.Currency)
	}
	if req.Amount < 0 || req.Amount > 999_999_999_999 {
		return nil, fmt.Errorf("%w: amount %d does not fit 12 digits", acquirer.ErrInvalidRequest, req.Amount)
	}
	now := a.client.cfg.Now().UTC()
	m := messages.Get().(*iso8583.Message)
	m.Reset(mti)
	m.Set(iso8583.FieldPAN, req.PAN).Set(iso8583.FieldProcessingCode, "000000").SetNumber(iso8583.FieldAmount, req.Amount)
	sent := iso8583.TransmissionTime(now)
	m.Set(iso8583.FieldTransmissionTime, sent)
	m.Set(iso8583.FieldLocalTime, sent[4:]).Set(iso8583.FieldLocalDate, sent[:4])
	if yymm, ok := expiry(req.ExpMonth, req.ExpYear); ok {
		m.Set(iso8583.FieldExpiry, yymm) // without it the issuer reads the card as expired
	}
	m.Set(iso8583.FieldPOSEntryMode, "810")
	m.Set(iso8583.FieldRRN, acquirer.RRN(req.Reference))
	m.Set(iso8583.FieldTerminalID, a.terminalID)
	m.Set(iso8583.FieldCardAcceptorID, acquirer.CardAcceptorID(req.MID, req.MerchantID))
	m.Set(iso8583.FieldCurrency, cur.Numeric)
	f48, err := additionalData(req)
	if err != nil {
		return nil, err
	}
	if f48 != "" {
		m.Set(iso8583.FieldAdditionalData, f48)
	}
	return m, nil
}

// additionalData is field 48: CVV2, 3-D Secure and wallet data as TLV.
// Built in a stack buffer (one allocation, the string): growing a slice
// element by element was the link's largest allocator.
func additionalData(req acquirer.AuthRequest) (string, error) {
	t := req.ThreeDS
	result := ""
	switch {
	case t.Authenticated:
		result = "Y"
	case t.NonSecure:
		result = "N"
	}
	eci := t.ECI
	if eci == "" {
		eci = req.ECI
	}
	elems := [...][2]string{
		{iso8583.TagCVV2, req.CVV}, {iso8583.TagThreeDSResult, result}, {iso8583.TagECI, eci},
		{iso8583.TagCAVV, t.CAVV}, {iso8583.TagXID, t.XID}, {iso8583.TagDSTransactionID, t.DSTransactionID},
		{iso8583.TagThreeDSVersion, t.Version}, {iso8583.TagWalletCryptogram, req.Cryptogram},
	}
	var buf [256]byte
	f48 := buf[:0]
	var errs []error
	for _, e := range elems {
		if e[1] == "" {
			continue
		}
		var err error
		if f48, err = iso8583.AppendTLV(f48, e[0], e[1]); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("%w: %v", acquirer.ErrInvalidRequest, err)
	}
	if len(f48) > 999 {
		return "", fmt.Errorf("%w: field 48 of %d bytes", acquirer.ErrInvalidRequest, len(f48))
	}
	return string(f48), nil
}

// expiry is field 14 (YYMM) of a card's month and four-digit year.
func expiry(month, year string) (string, bool) {
	if len(month) == 1 {
		month = "0" + month
	}
	if len(month) != 2 || len(year) != 4 || !digits(month) || !digits(year) {
		return "", false
	}
	var b [4]byte
	copy(b[:2], year[2:])
	copy(b[2:], month)
	return string(b[:]), true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
