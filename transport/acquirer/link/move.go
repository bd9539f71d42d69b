package link

import (
	"context"
	"fmt"
	"strings"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// Move sends a capture (0220, repeat 0221), a reversal (0400, repeat 0401)
// or a refund (0200, processing code 200000) recorded in the gateway's log,
// and reads its answer through the response code table. Every attempt
// carries the request's STAN, RRN and transmission time, so the host
// answers a repeat with its first answer and moves the money once. An error
// is the link's: repeat with the same request (Repeat set).
func (a *Acquirer) Move(ctx context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error) {
	msg, err := a.moveMessage(req)
	if err != nil {
		return acquirer.MoveResult{}, err
	}
	movesSent(msg.MTI).Inc()
	ans, err := a.client.DoKeepingSTAN(ctx, msg)
	if err != nil {
		return acquirer.MoveResult{}, err
	}
	if ans.Value(iso8583.FieldRRN) != req.RRN {
		return acquirer.MoveResult{}, fmt.Errorf("acquirer link: answer for RRN %q to a movement of RRN %q",
			ans.Value(iso8583.FieldRRN), req.RRN)
	}
	code := ans.Value(iso8583.FieldResponseCode)
	if code == acquirer.RespApproved {
		arn, _ := iso8583.LookupTLV(ans.Value(iso8583.FieldAdditionalData), iso8583.TagARN)
		return acquirer.MoveResult{Approved: true, ARN: arn}, nil
	}
	row := acquirer.ResponseFor(code)
	return acquirer.MoveResult{DeclineCode: row.Decline, DeclineMessage: row.Message}, nil
}

// moveMessage builds a movement's message.
func (a *Acquirer) moveMessage(req acquirer.MoveRequest) (*iso8583.Message, error) {
	var mti, proc string
	switch req.Kind {
	case acquirer.MoveCapture:
		mti, proc = "0220", "000000"
	case acquirer.MoveReversal:
		mti, proc = "0400", "000000"
	case acquirer.MoveRefund:
		mti, proc = "0200", "200000"
	default:
		return nil, fmt.Errorf("%w: movement kind %q", acquirer.ErrInvalidRequest, req.Kind)
	}
	if req.Repeat && req.Kind != acquirer.MoveRefund {
		mti = mti[:3] + "1" // advice repeat: 0221, 0401
	}
	cur, ok := currency.Lookup(req.Currency)
	if !ok {
		return nil, fmt.Errorf("%w: currency %q has no ISO 4217 number", acquirer.ErrInvalidRequest, req.Currency)
	}
	if req.Amount <= 0 || req.Amount > 999_999_999_999 {
		return nil, fmt.Errorf("%w: amount %d does not fit 12 digits", acquirer.ErrInvalidRequest, req.Amount)
	}
	m := iso8583.New(mti)
	m.Set(iso8583.FieldProcessingCode, proc).SetNumber(iso8583.FieldAmount, req.Amount)
	sent := iso8583.TransmissionTime(req.At.UTC())
	m.Set(iso8583.FieldTransmissionTime, sent)
	m.Set(iso8583.FieldLocalTime, sent[4:]).Set(iso8583.FieldLocalDate, sent[:4])
	m.Set(iso8583.FieldSTAN, req.STAN)
	m.Set(iso8583.FieldPOSEntryMode, "810")
	m.Set(iso8583.FieldRRN, req.RRN)
	m.Set(iso8583.FieldTerminalID, a.terminalID)
	m.Set(iso8583.FieldCardAcceptorID, acquirer.CardAcceptorID(req.MID, req.MerchantID))
	m.Set(iso8583.FieldCurrency, cur.Numeric)
	if req.Kind == acquirer.MoveRefund {
		m.Set(iso8583.FieldPAN, req.PAN)
		if yymm, ok := expiry(req.ExpMonth, req.ExpYear); ok {
			m.Set(iso8583.FieldExpiry, yymm)
		}
		return m, nil
	}
	m.Set(iso8583.FieldOriginalDataElement, originalData(req.OrigMTI, req.OrigTrace))
	return m, nil
}

// originalData is field 90: the original's MTI, STAN and transmission time
// (zeros when its answer never came), then 22 zeros of institution ids.
func originalData(mti, trace string) string {
	if len(mti) != 4 || !digits(mti) {
		mti = "0100"
	}
	if len(trace) != 16 || !digits(trace) {
		trace = strings.Repeat("0", 16)
	}
	return mti + trace + strings.Repeat("0", 22)
}

// movesSent counts movement messages sent, by MTI (first attempts and
// repeats apart: 0220/0221, 0400/0401, 0200 refunds).
func movesSent(mti string) *metrics.Counter {
	return metrics.GetOrCreateCounter(`gateway_acquirer_movements_sent_total{mti="` + mti + `"}`)
}
