package host

import (
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

// Processing code (field 3) transaction types: the first two digits.
const (
	procPurchase = "00"
	procRefund   = "20"
)

// required lists the fields a request of each class must carry; one
// missing is answered 30, format error, and recorded nowhere.
var required = map[string][]int{
	"01": {2, 3, 4, 7, 11, 37, 41, 42, 49},  // authorisation
	"02": {2, 3, 4, 7, 11, 37, 41, 42, 49},  // sale, refund
	"22": {3, 4, 7, 11, 37, 41, 42, 49, 90}, // completion advice (capture)
	"04": {3, 4, 7, 11, 37, 41, 42, 49, 90}, // reversal
	"08": {7, 11, 70},                       // network management
}

// handle decides one request and returns its answer (nil: none is due).
func (h *Host) handle(req *iso8583.Message) *iso8583.Message {
	class := ""
	switch req.MTI {
	case "0100":
		class = "01"
	case "0200":
		class = "02"
	case "0220", "0221":
		class = "22"
	case "0400", "0401":
		class = "04"
	case "0800":
		class = "08"
	default:
		h.cfg.Logger.Warn("acquirer host: message type not served", "mti", req.MTI)
		return nil
	}
	resp := answerTo(req)
	for _, f := range required[class] {
		if !req.Has(f) {
			return resp.Set(iso8583.FieldResponseCode, acquirer.RespFormatError)
		}
	}
	if class == "08" {
		return resp.Set(iso8583.FieldNetworkManagement, req.Value(iso8583.FieldNetworkManagement)).
			Set(iso8583.FieldResponseCode, acquirer.RespApproved)
	}
	kind := KindAuth
	switch {
	case class == "02" && req.Value(iso8583.FieldProcessingCode)[:2] == procRefund:
		kind = KindRefund
	case class == "02":
		kind = KindSale
	case class == "22":
		kind = KindCapture
	case class == "04":
		kind = KindReversal
	}
	rec, err := h.decideOnce(kind, req)
	if err != nil {
		// Not recorded, so not decided: answer nothing, and the repeat
		// decides.
		h.cfg.Logger.Error("acquirer host: ledger write failed; no answer", "mti", req.MTI, "error", err)
		return nil
	}
	resp.Set(iso8583.FieldResponseCode, rec.Response)
	if rec.AuthCode != "" {
		resp.Set(iso8583.FieldAuthCode, rec.AuthCode)
	}
	var buf [128]byte // the answer's field 48 fits: no growing slice
	f48 := buf[:0]
	for _, t := range [...][2]string{{iso8583.TagARN, rec.ARN}, {iso8583.TagAVSResult, rec.AVS}, {iso8583.TagCVVResult, rec.CVV}} {
		if t[1] != "" {
			f48, _ = iso8583.AppendTLV(f48, t[0], t[1])
		}
	}
	if len(f48) > 0 {
		resp.Set(iso8583.FieldAdditionalData, string(f48))
	}
	return resp
}

// answerTo starts the answer: the response MTI (third digit + 1, a repeat's
// last digit dropped: 0221 → 0230) and the fields it echoes.
func answerTo(req *iso8583.Message) *iso8583.Message {
	resp := messages.Get().(*iso8583.Message)
	resp.Reset(responseMTI(req.MTI))
	for _, f := range []int{3, 4, 7, 11, 12, 13, 37, 41, 42, 49} {
		if v, ok := req.Get(f); ok {
			resp.Set(f, v)
		}
	}
	return resp
}

// responseMTI is the answer's MTI to a request's: a literal for those the
// host serves (no allocation), else the third digit + 1 and the last 0.
func responseMTI(mti string) string {
	switch mti {
	case "0100":
		return "0110"
	case "0200":
		return "0210"
	case "0220", "0221":
		return "0230"
	case "0400", "0401":
		return "0410"
	case "0800":
		return "0810"
	}
	b := []byte(mti)
	b[2]++
	b[3] = '0'
	return string(b)
}

// decideOnce returns the record of req's first decision: made now and
// written to the ledger if there is none, else the one made before (a
// repeat, concurrent or after a restart).
func (h *Host) decideOnce(kind string, req *iso8583.Message) (*Record, error) {
	k, f := recordFields(kind, req)
	h.mu.Lock()
	for {
		if r, ok := h.window.get(k); ok {
			h.mu.Unlock()
			return r, nil
		}
		if _, busy := h.inflight[k]; !busy {
			break
		}
		// The first one is being decided; then read its record. One
		// condition for all keys: a concurrent repeat is rare, and a
		// channel per decision was an allocation on every message.
		h.decided.Wait()
	}
	h.inflight[k] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.inflight, k)
		h.decided.Broadcast()
		h.mu.Unlock()
	}()
	now := h.cfg.Now().UTC()
	amount, _ := strconv.ParseInt(req.Value(iso8583.FieldAmount), 10, 64)
	r := &Record{
		Time: now.UnixNano(), Date: h.date(now), Kind: kind, MTI: f.mti,
		MID: f.mid, RRN: f.rrn, STAN: f.stan, Sent: f.sent, Amount: amount, Currency: f.currency,
	}
	if held, ok := h.decide(r, req, now); ok {
		// Deferred after the one above, so run before it: the original
		// is let go once this advice is remembered (or failed), before
		// its repeats read its record.
		defer h.releaseOriginal(held)
	}
	if err := h.ledger.Append(r); err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.rememberAs(r, k)
	if kind == KindAuth || kind == KindSale {
		h.total++
	}
	h.mu.Unlock()
	return r, nil
}

// date is now's UTC day, YYYY-MM-DD, formatted once a day rather than
// once a record.
func (h *Host) date(now time.Time) string {
	y, m, d := now.Date()
	if c := h.day.Load(); c != nil && c.y == y && c.m == m && c.d == d {
		return c.s
	}
	c := &day{y: y, m: m, d: d, s: now.Format(time.DateOnly)}
	h.day.Store(c)
	return c.s
}

// day is a formatted UTC day.
type day struct {
	y, d int
	m    time.Month
	s    string
}

// messageFields are the request's fields a record keeps.
type messageFields struct{ mti, mid, rrn, stan, sent, currency string }

// recordFields returns req's repeat key (key) and the fields its record
// keeps, all made in one string (one allocation): not substrings of the
// request's frame, which holds the card number and CVV and must not live
// on in the repeat index with the record.
func recordFields(kind string, req *iso8583.Message) (string, messageFields) {
	mid, rrn := req.Value(iso8583.FieldCardAcceptorID), req.Value(iso8583.FieldRRN)
	stan, sent := req.Value(iso8583.FieldSTAN), req.Value(iso8583.FieldTransmissionTime)
	cur := req.Value(iso8583.FieldCurrency)
	parts := [...]string{req.MTI, mid, rrn, stan, sent, cur}
	var b strings.Builder
	b.Grow(len(kind) + 2*(len(mid)+len(rrn)+len(stan)+len(sent)) + len(req.MTI) + len(cur) + 8)
	appendKey(&b, kind, mid, rrn, stan, sent)
	klen := b.Len()
	ends := [len(parts)]int{}
	for i, p := range parts {
		b.WriteString(p)
		ends[i] = b.Len()
	}
	all := b.String()
	var v [len(parts)]string
	for i, start := 0, klen; i < len(parts); i++ {
		v[i], start = all[start:ends[i]], ends[i]
	}
	return all[:klen], messageFields{mti: v[0], mid: v[1], rrn: v[2], stan: v[3], sent: v[4], currency: v[5]}
}

// decide fills r's answer. For a capture or reversal of a known original
// it returns that original, held (advising) so that it does not change
// until r is remembered; the caller lets it go (releaseOriginal).
func (h *Host) decide(r *Record, req *iso8583.Message, now time.Time) (held originalRef, holds bool) {
	switch r.Kind {
	case KindAuth, KindSale:
		decideCard(r, req, now)
	case KindRefund:
		if acquirer.DeclinesMove(r.Amount) {
			r.Response = acquirer.RespDoNotHonour
			return
		}
		r.Response = acquirer.RespApproved
		r.ARN = acquirer.ARN(r.MID + r.RRN)
	case KindCapture, KindReversal:
		f90 := req.Value(iso8583.FieldOriginalDataElement)
		h.mu.Lock()
		ref, found := h.findOriginal(r.MID, f90, r.RRN)
		for found && h.window.advising(ref) {
			h.advised.Wait()
			// Looked up again: the repeat index may have let it go.
			ref, found = h.findOriginal(r.MID, f90, r.RRN)
		}
		var o *original
		if found {
			if snapshot, ok := h.window.original(ref); ok {
				h.window.setAdvising(ref, true)
				held, holds, o = ref, true, &snapshot
				r.Original = snapshot.key
			}
		}
		h.mu.Unlock()
		switch {
		case r.Kind == KindReversal:
			// A reversal is always acknowledged, found or not: the
			// gateway repeats it until it has an answer, and an
			// authorisation that never arrived needs no undoing.
			r.Response = acquirer.RespApproved
		case acquirer.DeclinesMove(r.Amount):
			r.Response = acquirer.RespDoNotHonour
		case o == nil && h.cfg.CaptureUnknownOriginals && r.Amount > 0:
			r.Response = acquirer.RespApproved
			r.ARN = acquirer.ARN(r.MID + r.RRN)
		case o == nil || o.kind != KindAuth || o.reversed || r.Amount <= 0 || o.captured+r.Amount > o.amount:
			r.Response = acquirer.RespInvalidTransaction
		default:
			r.Response = acquirer.RespApproved
			r.ARN = acquirer.ARN(r.MID + r.RRN)
		}
	}
	return held, holds
}

// releaseOriginal lets o go after its capture or reversal (decide).
func (h *Host) releaseOriginal(o originalRef) {
	h.mu.Lock()
	h.window.setAdvising(o, false)
	h.advised.Broadcast()
	h.mu.Unlock()
}

// findOriginal looks up field 90's original (MTI 4, STAN 6, transmission
// time 10, then institution ids) among the approved authorisations and
// sales, and failing that the one of the same MID and RRN: a gateway's
// advice carries its original's RRN, and field 90 may name another attempt
// of it (a repeat's STAN and time) or none (zeros: no answer came).
func (h *Host) findOriginal(mid, f90, rrn string) (originalRef, bool) {
	if len(f90) >= 20 {
		if o, ok := h.window.originalByMessage(mid, f90[4:10], f90[10:20]); ok {
			return o, true
		}
	}
	for _, kind := range []string{KindAuth, KindSale} {
		if o, ok := h.window.originalByKey(key(kind, mid, rrn, "", "")); ok {
			return o, true
		}
	}
	return originalRef{}, false
}

// decideCard decides an authorisation or sale by the test cards (contract
// section 7): a pure function of the card number, expiry against now, the
// CVV's presence and the 3-D Secure and wallet data.
func decideCard(r *Record, req *iso8583.Message, now time.Time) {
	pan := req.Value(iso8583.FieldPAN)
	f48 := req.Value(iso8583.FieldAdditionalData)
	_, hasCVV := iso8583.LookupTLV(f48, iso8583.TagCVV2)
	threeDS, _ := iso8583.LookupTLV(f48, iso8583.TagThreeDSResult)
	_, hasCryptogram := iso8583.LookupTLV(f48, iso8583.TagWalletCryptogram)

	code, avs, cvv := acquirer.DecideTestCard(pan, hasCVV, threeDS, hasCryptogram)
	r.AVS, r.CVV = avs, cvv
	switch {
	case code != acquirer.RespApproved:
	case !acquirer.Luhn(pan):
		code = acquirer.RespDoNotHonour
	case expired(req.Value(iso8583.FieldExpiry), now):
		code = acquirer.RespExpiredCard
	}
	r.Response = code
	if code == acquirer.RespApproved {
		r.AuthCode = acquirer.AuthCode(r.MID + r.RRN)
		r.ARN = acquirer.ARN(r.MID + r.RRN)
	}
}

// expired reports whether a card expiring in yymm (field 14) can no longer
// be used at now: a card is good to the end of its month. A missing or
// impossible expiry is expired.
func expired(yymm string, now time.Time) bool {
	if len(yymm) != 4 {
		return true
	}
	y, yerr := strconv.Atoi(yymm[:2])
	m, merr := strconv.Atoi(yymm[2:])
	if yerr != nil || merr != nil || m < 1 || m > 12 {
		return true
	}
	y += now.Year() / 100 * 100
	return y < now.Year() || y == now.Year() && time.Month(m) < now.Month()
}
