package order

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Binary codec of Order (the stored record), Command (the replicated log
// entry) and TokenGrant (the stored token record). JSON of both cost ~15% of a node's CPU per charge; this codec is
// hand-written, append-style and allocation-light.
//
// Format: a leading version byte, then every field in declaration order:
//
//	string, Kind, Status...  uvarint length, bytes
//	[]byte                   uvarint length, bytes (empty decodes as nil)
//	int64                    varint (zig-zag)
//	uint64                   uvarint
//	bool                     one byte, 0 or 1
//	pointer                  presence byte 0 or 1, then the value
//	slice                    uvarint count, then each element (0 decodes as nil)
//
// An empty slice and a nil one encode alike (as nil), so two replicas that
// hold the same order as [] and nil still write the same bytes. Apply never
// makes an empty non-nil slice, so its orders round-trip exactly.
//
// Decoding never panics: every length is bounds-checked, a bool or presence
// byte other than 0 or 1, a truncated value and trailing bytes are errors.
// Decoded strings share one copy of the input (one allocation for all of
// them) and never alias it: Pebble reuses its value buffers. A value that
// keeps one of them keeps the whole copy: an order that Apply made from a
// command holds that command's bytes (sealed card included) while it lives
// in the order cache.
//
// A field added to any of these structs must be added to the append and the
// decode function of its struct (the round-trip test fills every exported
// field by reflection and fails on one left out), with a new version byte:
// stored orders and logged commands of the old version must still decode.

// Format versions: the first byte of an encoded order or command. A stored
// order that starts with '{' is legacy JSON (persistence decodes it).
const (
	orderFormatV1      byte = 1
	commandFormatV1    byte = 1
	tokenGrantFormatV1 byte = 1
)

// ErrCodec is wrapped by every decoding error.
var ErrCodec = errors.New("order codec")

// AppendOrder appends the binary encoding of o to dst.
func AppendOrder(dst []byte, o *Order) []byte {
	dst = append(dst, orderFormatV1)
	dst = appendString(dst, o.Merchant)
	dst = appendString(dst, o.ID)
	dst = binary.AppendVarint(dst, o.Amount)
	dst = appendString(dst, o.Currency)
	dst = appendString(dst, string(o.Status))
	dst = binary.AppendVarint(dst, o.SettledAmount)
	dst = binary.AppendVarint(dst, o.RefundedAmount)
	dst = appendString(dst, o.Description)
	dst = appendString(dst, o.Descriptor)
	dst = appendBool(dst, o.Decline != nil)
	if o.Decline != nil {
		dst = appendString(dst, o.Decline.Code)
		dst = appendString(dst, o.Decline.Message)
	}
	dst = appendString(dst, o.RiskDecision)
	dst = appendString(dst, o.AVSCheck)
	dst = appendString(dst, o.CVVCheck)
	dst = appendThreeDSPtr(dst, o.ThreeDS)
	dst = appendString(dst, o.Website)
	dst = appendString(dst, o.ProcessingMID)
	dst = appendString(dst, o.SubscriptionID)
	dst = appendString(dst, o.RedirectURL)
	dst = appendString(dst, o.CallbackURL)
	dst = appendString(dst, o.SuccessURL)
	dst = appendString(dst, o.FailURL)
	dst = binary.AppendVarint(dst, o.SettleDelayHours)
	dst = binary.AppendVarint(dst, o.AutoSettleAt)
	dst = appendSource(dst, &o.Source)
	dst = binary.AppendUvarint(dst, uint64(len(o.Txns)))
	for i := range o.Txns {
		dst = appendTxn(dst, &o.Txns[i])
	}
	dst = appendString(dst, o.RequestHash)
	dst = binary.AppendVarint(dst, o.CreatedAt)
	dst = binary.AppendVarint(dst, o.UpdatedAt)
	dst = binary.AppendUvarint(dst, o.Version)
	dst = appendBool(dst, o.Pending != nil)
	if p := o.Pending; p != nil {
		dst = appendString(dst, p.TxnID)
		dst = appendThreeDSPtr(dst, p.ThreeDS)
		dst = appendString(dst, p.Challenge)
		dst = binary.AppendVarint(dst, p.ChallengeExpiresAt)
		dst = appendString(dst, p.WalletCryptogram)
	}
	dst = appendString(dst, o.WalletAuthMethod)
	dst = appendString(dst, o.WalletECI)
	dst = appendString(dst, o.FormTokenHash)
	dst = binary.AppendVarint(dst, o.FormExpiresAt)
	dst = appendString(dst, o.Language)
	dst = appendBool(dst, o.ThreeDSForce)
	return appendBool(dst, o.AttemptNonSecure)
}

// DecodeOrder decodes what AppendOrder encoded. b is not retained.
func DecodeOrder(b []byte) (*Order, error) {
	d := newDecoder(b, orderFormatV1, "order")
	o := &Order{}
	o.Merchant = d.string()
	o.ID = d.string()
	o.Amount = d.varint()
	o.Currency = d.string()
	o.Status = Status(d.string())
	o.SettledAmount = d.varint()
	o.RefundedAmount = d.varint()
	o.Description = d.string()
	o.Descriptor = d.string()
	if d.present() {
		o.Decline = &Decline{Code: d.string(), Message: d.string()}
	}
	o.RiskDecision = d.string()
	o.AVSCheck = d.string()
	o.CVVCheck = d.string()
	o.ThreeDS = d.threeDSPtr()
	o.Website = d.string()
	o.ProcessingMID = d.string()
	o.SubscriptionID = d.string()
	o.RedirectURL = d.string()
	o.CallbackURL = d.string()
	o.SuccessURL = d.string()
	o.FailURL = d.string()
	o.SettleDelayHours = d.varint()
	o.AutoSettleAt = d.varint()
	d.source(&o.Source)
	if n := d.count(txnBytesMin); n > 0 {
		o.Txns = make([]Transaction, n)
		for i := range o.Txns {
			d.txn(&o.Txns[i])
		}
	}
	o.RequestHash = d.string()
	o.CreatedAt = d.varint()
	o.UpdatedAt = d.varint()
	o.Version = d.uvarint()
	if d.present() {
		p := &PendingAuth{}
		p.TxnID = d.string()
		p.ThreeDS = d.threeDSPtr()
		p.Challenge = d.string()
		p.ChallengeExpiresAt = d.varint()
		p.WalletCryptogram = d.string()
		o.Pending = p
	}
	o.WalletAuthMethod = d.string()
	o.WalletECI = d.string()
	o.FormTokenHash = d.string()
	o.FormExpiresAt = d.varint()
	o.Language = d.string()
	o.ThreeDSForce = d.bool()
	o.AttemptNonSecure = d.bool()
	if err := d.finish(); err != nil {
		return nil, err
	}
	return o, nil
}

// AppendCommand appends the binary encoding of c to dst.
func AppendCommand(dst []byte, c *Command) []byte {
	dst = append(dst, commandFormatV1)
	dst = appendString(dst, string(c.Kind))
	dst = binary.AppendVarint(dst, c.Time)
	dst = appendString(dst, c.Merchant)
	dst = appendString(dst, c.OrderID)
	dst = appendString(dst, c.TxnID)
	dst = binary.AppendVarint(dst, c.Amount)
	dst = appendString(dst, c.ARN)
	dst = appendString(dst, c.RefundReasonCode)
	dst = appendBool(dst, c.Auto)
	dst = appendString(dst, c.IdempotencyKey)
	dst = appendString(dst, c.RequestHash)

	dst = appendBool(dst, c.Create != nil)
	if cd := c.Create; cd != nil {
		dst = binary.AppendVarint(dst, cd.Amount)
		dst = appendString(dst, cd.Currency)
		dst = appendString(dst, cd.Description)
		dst = appendString(dst, cd.Descriptor)
		dst = appendString(dst, cd.Website)
		dst = appendString(dst, cd.ProcessingMID)
		dst = appendString(dst, cd.SubscriptionID)
		dst = appendString(dst, cd.CallbackURL)
		dst = appendString(dst, cd.SuccessURL)
		dst = appendString(dst, cd.FailURL)
		dst = binary.AppendVarint(dst, cd.SettleDelayHours)
		dst = appendSource(dst, &cd.Source)
		dst = appendBytes(dst, cd.SealedCard)
		dst = appendThreeDSPtr(dst, cd.ThreeDS)
		dst = appendString(dst, cd.ReplayKey)
		dst = appendString(dst, cd.WalletAuthMethod)
		dst = appendString(dst, cd.WalletECI)
		dst = appendString(dst, cd.WalletCryptogram)
		dst = appendBool(dst, cd.ThreeDSForce)
		dst = appendBool(dst, cd.AttemptNonSecure)
	}
	dst = appendBool(dst, c.Outcome != nil)
	if r := c.Outcome; r != nil {
		dst = appendBool(dst, r.Approved)
		dst = appendString(dst, r.AuthCode)
		dst = appendString(dst, r.AVSCheck)
		dst = appendString(dst, r.CVVCheck)
		dst = appendString(dst, r.RiskDecision)
		dst = appendString(dst, r.DeclineCode)
		dst = appendString(dst, r.DeclineMessage)
		dst = appendString(dst, r.PaymentToken)
		dst = binary.AppendVarint(dst, r.TokenExpiresAt)
		dst = binary.AppendVarint(dst, r.AutoSettleAt)
	}
	dst = appendBool(dst, c.Form != nil)
	if f := c.Form; f != nil {
		dst = appendString(dst, f.TokenHash)
		dst = binary.AppendVarint(dst, f.ExpiresAt)
		dst = appendString(dst, f.Language)
	}
	dst = appendBool(dst, c.Submit != nil)
	if s := c.Submit; s != nil {
		dst = appendSource(dst, &s.Source)
		dst = appendBytes(dst, s.SealedCard)
	}
	dst = appendBool(dst, c.Challenge != nil)
	if ch := c.Challenge; ch != nil {
		dst = appendString(dst, ch.ID)
		dst = appendString(dst, ch.RedirectURL)
		dst = binary.AppendVarint(dst, ch.ExpiresAt)
	}
	dst = appendBool(dst, c.ThreeDSResult != nil)
	if r := c.ThreeDSResult; r != nil {
		dst = appendString(dst, r.ChallengeID)
		dst = appendBool(dst, r.Authenticated)
		dst = appendThreeDSPtr(dst, r.Result)
		dst = appendString(dst, r.DeclineCode)
		dst = appendString(dst, r.DeclineMessage)
	}
	return dst
}

// DecodeCommand decodes what AppendCommand encoded. b is not retained.
func DecodeCommand(b []byte) (*Command, error) {
	d := newDecoder(b, commandFormatV1, "command")
	c := &Command{}
	c.Kind = Kind(d.string())
	c.Time = d.varint()
	c.Merchant = d.string()
	c.OrderID = d.string()
	c.TxnID = d.string()
	c.Amount = d.varint()
	c.ARN = d.string()
	c.RefundReasonCode = d.string()
	c.Auto = d.bool()
	c.IdempotencyKey = d.string()
	c.RequestHash = d.string()

	if d.present() {
		cd := &CreateData{}
		cd.Amount = d.varint()
		cd.Currency = d.string()
		cd.Description = d.string()
		cd.Descriptor = d.string()
		cd.Website = d.string()
		cd.ProcessingMID = d.string()
		cd.SubscriptionID = d.string()
		cd.CallbackURL = d.string()
		cd.SuccessURL = d.string()
		cd.FailURL = d.string()
		cd.SettleDelayHours = d.varint()
		d.source(&cd.Source)
		cd.SealedCard = d.bytes()
		cd.ThreeDS = d.threeDSPtr()
		cd.ReplayKey = d.string()
		cd.WalletAuthMethod = d.string()
		cd.WalletECI = d.string()
		cd.WalletCryptogram = d.string()
		cd.ThreeDSForce = d.bool()
		cd.AttemptNonSecure = d.bool()
		c.Create = cd
	}
	if d.present() {
		r := &OutcomeData{}
		r.Approved = d.bool()
		r.AuthCode = d.string()
		r.AVSCheck = d.string()
		r.CVVCheck = d.string()
		r.RiskDecision = d.string()
		r.DeclineCode = d.string()
		r.DeclineMessage = d.string()
		r.PaymentToken = d.string()
		r.TokenExpiresAt = d.varint()
		r.AutoSettleAt = d.varint()
		c.Outcome = r
	}
	if d.present() {
		c.Form = &FormData{TokenHash: d.string(), ExpiresAt: d.varint(), Language: d.string()}
	}
	if d.present() {
		s := &SubmitData{}
		d.source(&s.Source)
		s.SealedCard = d.bytes()
		c.Submit = s
	}
	if d.present() {
		c.Challenge = &ChallengeData{ID: d.string(), RedirectURL: d.string(), ExpiresAt: d.varint()}
	}
	if d.present() {
		r := &ThreeDSResultData{}
		r.ChallengeID = d.string()
		r.Authenticated = d.bool()
		r.Result = d.threeDSPtr()
		r.DeclineCode = d.string()
		r.DeclineMessage = d.string()
		c.ThreeDSResult = r
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// Shared parts.

func appendTxn(dst []byte, t *Transaction) []byte {
	dst = appendString(dst, t.ID)
	dst = binary.AppendVarint(dst, t.CreatedAt)
	dst = binary.AppendVarint(dst, t.UpdatedAt)
	dst = appendString(dst, string(t.Operation))
	dst = appendString(dst, string(t.Status))
	dst = appendString(dst, t.Currency)
	dst = binary.AppendVarint(dst, t.Amount)
	dst = appendString(dst, t.AuthCode)
	dst = appendString(dst, t.ARN)
	return appendString(dst, t.RefundReasonCode)
}

// txnBytesMin is the smallest encoded Transaction (ten one-byte fields):
// a count larger than the remaining bytes allow is refused before it is
// allocated.
const txnBytesMin = 10

func (d *decoder) txn(t *Transaction) {
	t.ID = d.string()
	t.CreatedAt = d.varint()
	t.UpdatedAt = d.varint()
	t.Operation = Operation(d.string())
	t.Status = TxnStatus(d.string())
	t.Currency = d.string()
	t.Amount = d.varint()
	t.AuthCode = d.string()
	t.ARN = d.string()
	t.RefundReasonCode = d.string()
}

func appendThreeDSPtr(dst []byte, t *ThreeDS) []byte {
	dst = appendBool(dst, t != nil)
	if t == nil {
		return dst
	}
	dst = appendString(dst, t.Enrolled)
	dst = appendString(dst, t.AuthenticationResult)
	dst = appendString(dst, t.Version)
	dst = appendString(dst, t.ECI)
	dst = appendString(dst, t.XID)
	return appendString(dst, t.CAVV)
}

func (d *decoder) threeDSPtr() *ThreeDS {
	if !d.present() {
		return nil
	}
	return &ThreeDS{
		Enrolled: d.string(), AuthenticationResult: d.string(), Version: d.string(),
		ECI: d.string(), XID: d.string(), CAVV: d.string(),
	}
}

// AppendTokenGrant appends the binary encoding of g to dst.
func AppendTokenGrant(dst []byte, g *TokenGrant) []byte {
	dst = append(dst, tokenGrantFormatV1)
	dst = appendString(dst, g.Merchant)
	dst = appendString(dst, g.CardID)
	dst = binary.AppendVarint(dst, g.ExpiresAt)
	return appendSource(dst, &g.Source)
}

// DecodeTokenGrant decodes what AppendTokenGrant encoded. b is not retained.
func DecodeTokenGrant(b []byte) (*TokenGrant, error) {
	d := newDecoder(b, tokenGrantFormatV1, "token grant")
	g := &TokenGrant{}
	g.Merchant = d.string()
	g.CardID = d.string()
	g.ExpiresAt = d.varint()
	d.source(&g.Source)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return g, nil
}

func appendSource(dst []byte, s *PaymentSource) []byte {
	dst = appendString(dst, s.Type)
	dst = appendString(dst, s.CardID)
	dst = appendString(dst, s.PaymentToken)
	dst = binary.AppendVarint(dst, s.TokenExpiresAt)
	dst = appendString(dst, s.Issuer)
	dst = appendString(dst, s.BIN)
	dst = appendString(dst, s.Brand)
	dst = appendString(dst, s.CardType)
	dst = appendString(dst, s.ExpMonth)
	dst = appendString(dst, s.ExpYear)
	dst = appendString(dst, s.HolderName)
	dst = appendString(dst, s.Masked)
	dst = appendString(dst, s.IssuerCountry)
	dst = appendBool(dst, s.Billing != nil)
	if a := s.Billing; a != nil {
		dst = appendString(dst, a.Line1)
		dst = appendString(dst, a.Line2)
		dst = appendString(dst, a.City)
		dst = appendString(dst, a.State)
		dst = appendString(dst, a.Zip)
		dst = appendString(dst, a.Country)
	}
	return dst
}

func (d *decoder) source(s *PaymentSource) {
	s.Type = d.string()
	s.CardID = d.string()
	s.PaymentToken = d.string()
	s.TokenExpiresAt = d.varint()
	s.Issuer = d.string()
	s.BIN = d.string()
	s.Brand = d.string()
	s.CardType = d.string()
	s.ExpMonth = d.string()
	s.ExpYear = d.string()
	s.HolderName = d.string()
	s.Masked = d.string()
	s.IssuerCountry = d.string()
	if d.present() {
		s.Billing = &Address{
			Line1: d.string(), Line2: d.string(), City: d.string(),
			State: d.string(), Zip: d.string(), Country: d.string(),
		}
	}
}

// Primitives.

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

// decoder reads from one string copy of the input, so every decoded string
// is a substring of it: one allocation for all of them. s is what is left
// to read. The first error sticks; later reads return zero values.
//
// uvarint, string and bool have a one-byte fast path small enough to be
// inlined: almost every value of an order is a short string, a small
// number or a flag.
type decoder struct {
	s    string
	n    int // input length, for error positions
	err  error
	what string
}

func newDecoder(b []byte, version byte, what string) decoder {
	d := decoder{what: what, n: len(b)}
	switch {
	case len(b) == 0:
		d.fail("empty input")
	case b[0] != version:
		d.fail(fmt.Sprintf("unknown format version %d", b[0]))
	default:
		d.s = string(b)[1:]
	}
	return d
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: decode %s: %s at byte %d", ErrCodec, d.what, msg, d.n-len(d.s))
	}
	d.s = ""
}

func (d *decoder) finish() error {
	if d.err == nil && len(d.s) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.s)))
	}
	return d.err
}

func (d *decoder) uvarint() uint64 {
	if s := d.s; s != "" && s[0] < 0x80 {
		d.s = s[1:]
		return uint64(s[0])
	}
	return d.uvarintSlow()
}

func (d *decoder) uvarintSlow() uint64 {
	var x uint64
	for i := range binary.MaxVarintLen64 {
		if len(d.s) == 0 {
			d.fail("truncated varint")
			return 0
		}
		c := d.s[0]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 {
				break
			}
			d.s = d.s[1:]
			return x | uint64(c)<<(7*i)
		}
		d.s = d.s[1:]
		x |= uint64(c&0x7f) << (7 * i)
	}
	d.fail("varint overflows 64 bits")
	return 0
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	return int64(ux>>1) ^ -int64(ux&1)
}

// length reads a length and checks that many bytes remain.
func (d *decoder) length() int {
	n := d.uvarint()
	if n > uint64(len(d.s)) {
		d.fail(fmt.Sprintf("length %d exceeds the input", n))
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	if s := d.s; s != "" && s[0] < 0x80 {
		if n := int(s[0]) + 1; n <= len(s) {
			d.s = s[n:]
			return s[1:n]
		}
	}
	return d.stringSlow()
}

func (d *decoder) stringSlow() string {
	n := d.length()
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.length()
	if n == 0 {
		return nil
	}
	b := []byte(d.s[:n])
	d.s = d.s[n:]
	return b
}

// count reads a slice length; each element takes at least elemMin bytes.
func (d *decoder) count(elemMin int) int {
	n := d.uvarint()
	if n > uint64(len(d.s)/elemMin) {
		d.fail(fmt.Sprintf("count %d exceeds the input", n))
		return 0
	}
	return int(n)
}

func (d *decoder) bool() bool {
	if s := d.s; s != "" && s[0] <= 1 {
		d.s = s[1:]
		return s[0] == 1
	}
	d.boolSlow()
	return false
}

func (d *decoder) boolSlow() {
	if len(d.s) == 0 {
		d.fail("truncated")
		return
	}
	d.fail(fmt.Sprintf("byte %#x is not a bool", d.s[0]))
}

// present reads a pointer's presence byte.
func (d *decoder) present() bool { return d.bool() }
