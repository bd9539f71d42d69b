package command

import (
	"encoding/binary"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command/wire"
)

// Binary codec of Order (the stored record), Command (the replicated log
// entry) and TokenGrant (the stored token record). JSON of the first two
// cost ~15% of a node's CPU per charge; this codec is hand-written,
// append-style and allocation-light.
//
// Format: a leading version byte, then every field in declaration order,
// each written as package wire says (Kind, Status and other string types
// as strings).
//
// An empty slice and a nil one encode alike (as nil), so two replicas that
// hold the same order as [] and nil still write the same bytes. Apply never
// makes an empty non-nil slice, so its orders round-trip exactly.
//
// Decoded strings share one copy of the input (wire.Decoder): an order that
// Apply made from a command holds that command's bytes (sealed card
// included) while it lives in the order cache.
//
// A field added to any of these structs must be added to the append and the
// decode function of its struct (the round-trip test fills every exported
// field by reflection and fails on one left out), with a new version byte:
// stored orders and logged commands of the old version must still decode.

// Format versions: the first byte of an encoded order or command. A stored
// order that starts with '{' is legacy JSON (persistence decodes it).
//
// Version 2 of orders and commands appends the customer's e-mail (the
// search index's key) after every version-1 field; version 1 still decodes,
// with no e-mail.
const (
	orderFormatV1      byte = 1
	orderFormatV2      byte = 2
	commandFormatV1    byte = 1
	commandFormatV2    byte = 2
	tokenGrantFormatV1 byte = 1
)

// formatVersion is b's version byte when it is one of the versions given
// (a decoder then reads it), else the first of them (the decoder fails on b
// naming the version it found).
func formatVersion(b []byte, versions ...byte) byte {
	for _, v := range versions {
		if len(b) > 0 && b[0] == v {
			return v
		}
	}
	return versions[0]
}

// ErrCodec is wrapped by every decoding error.
var ErrCodec = wire.ErrCodec

// AppendOrder appends the binary encoding of o to dst.
func AppendOrder(dst []byte, o *order.Order) []byte {
	dst = append(dst, orderFormatV2)
	dst = wire.AppendString(dst, o.Merchant)
	dst = wire.AppendString(dst, o.ID)
	dst = binary.AppendVarint(dst, o.Amount)
	dst = wire.AppendString(dst, o.Currency)
	dst = wire.AppendString(dst, string(o.Status))
	dst = binary.AppendVarint(dst, o.SettledAmount)
	dst = binary.AppendVarint(dst, o.RefundedAmount)
	dst = wire.AppendString(dst, o.Description)
	dst = wire.AppendString(dst, o.Descriptor)
	dst = wire.AppendBool(dst, o.Decline != nil)
	if o.Decline != nil {
		dst = wire.AppendString(dst, o.Decline.Code)
		dst = wire.AppendString(dst, o.Decline.Message)
	}
	dst = wire.AppendString(dst, o.RiskDecision)
	dst = wire.AppendString(dst, o.AVSCheck)
	dst = wire.AppendString(dst, o.CVVCheck)
	dst = appendThreeDSPtr(dst, o.ThreeDS)
	dst = wire.AppendString(dst, o.Website)
	dst = wire.AppendString(dst, o.ProcessingMID)
	dst = wire.AppendString(dst, o.SubscriptionID)
	dst = wire.AppendString(dst, o.RedirectURL)
	dst = wire.AppendString(dst, o.CallbackURL)
	dst = wire.AppendString(dst, o.SuccessURL)
	dst = wire.AppendString(dst, o.FailURL)
	dst = binary.AppendVarint(dst, o.SettleDelayHours)
	dst = binary.AppendVarint(dst, o.AutoSettleAt)
	dst = appendSource(dst, &o.Source)
	dst = binary.AppendUvarint(dst, uint64(len(o.Txns)))
	for i := range o.Txns {
		dst = appendTxn(dst, &o.Txns[i])
	}
	dst = wire.AppendString(dst, o.RequestHash)
	dst = binary.AppendVarint(dst, o.CreatedAt)
	dst = binary.AppendVarint(dst, o.UpdatedAt)
	dst = binary.AppendUvarint(dst, o.Version)
	dst = wire.AppendBool(dst, o.Pending != nil)
	if p := o.Pending; p != nil {
		dst = wire.AppendString(dst, p.TxnID)
		dst = appendThreeDSPtr(dst, p.ThreeDS)
		dst = wire.AppendString(dst, p.Challenge)
		dst = binary.AppendVarint(dst, p.ChallengeExpiresAt)
		dst = wire.AppendString(dst, p.WalletCryptogram)
	}
	dst = wire.AppendString(dst, o.WalletAuthMethod)
	dst = wire.AppendString(dst, o.WalletECI)
	dst = wire.AppendString(dst, o.FormTokenHash)
	dst = binary.AppendVarint(dst, o.FormExpiresAt)
	dst = wire.AppendString(dst, o.Language)
	dst = wire.AppendBool(dst, o.ThreeDSForce)
	dst = wire.AppendBool(dst, o.AttemptNonSecure)
	return wire.AppendString(dst, o.CustomerEmail)
}

// DecodeOrder decodes what AppendOrder encoded. b is not retained.
func DecodeOrder(b []byte) (*order.Order, error) {
	version := formatVersion(b, orderFormatV2, orderFormatV1)
	d := newDecoder(b, version, "order")
	o := &order.Order{}
	o.Merchant = d.Str()
	o.ID = d.Str()
	o.Amount = d.Varint()
	o.Currency = d.Str()
	o.Status = order.Status(d.Str())
	o.SettledAmount = d.Varint()
	o.RefundedAmount = d.Varint()
	o.Description = d.Str()
	o.Descriptor = d.Str()
	if d.Present() {
		o.Decline = &order.Decline{Code: d.Str(), Message: d.Str()}
	}
	o.RiskDecision = d.Str()
	o.AVSCheck = d.Str()
	o.CVVCheck = d.Str()
	o.ThreeDS = d.threeDSPtr()
	o.Website = d.Str()
	o.ProcessingMID = d.Str()
	o.SubscriptionID = d.Str()
	o.RedirectURL = d.Str()
	o.CallbackURL = d.Str()
	o.SuccessURL = d.Str()
	o.FailURL = d.Str()
	o.SettleDelayHours = d.Varint()
	o.AutoSettleAt = d.Varint()
	d.source(&o.Source)
	if n := d.Count(txnBytesMin); n > 0 {
		o.Txns = make([]order.Transaction, n)
		for i := range o.Txns {
			d.txn(&o.Txns[i])
		}
	}
	o.RequestHash = d.Str()
	o.CreatedAt = d.Varint()
	o.UpdatedAt = d.Varint()
	o.Version = d.Uvarint()
	if d.Present() {
		p := &order.PendingAuth{}
		p.TxnID = d.Str()
		p.ThreeDS = d.threeDSPtr()
		p.Challenge = d.Str()
		p.ChallengeExpiresAt = d.Varint()
		p.WalletCryptogram = d.Str()
		o.Pending = p
	}
	o.WalletAuthMethod = d.Str()
	o.WalletECI = d.Str()
	o.FormTokenHash = d.Str()
	o.FormExpiresAt = d.Varint()
	o.Language = d.Str()
	o.ThreeDSForce = d.Bool()
	o.AttemptNonSecure = d.Bool()
	if version >= orderFormatV2 {
		o.CustomerEmail = d.Str()
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return o, nil
}

// AppendCommand appends the binary encoding of c to dst.
func AppendCommand(dst []byte, c *order.Command) []byte {
	dst = append(dst, commandFormatV2)
	dst = wire.AppendString(dst, string(c.Kind))
	dst = binary.AppendVarint(dst, c.Time)
	dst = wire.AppendString(dst, c.Merchant)
	dst = wire.AppendString(dst, c.OrderID)
	dst = wire.AppendString(dst, c.TxnID)
	dst = binary.AppendVarint(dst, c.Amount)
	dst = wire.AppendString(dst, c.ARN)
	dst = wire.AppendString(dst, c.RefundReasonCode)
	dst = wire.AppendBool(dst, c.Auto)
	dst = wire.AppendString(dst, c.IdempotencyKey)
	dst = wire.AppendString(dst, c.RequestHash)

	dst = wire.AppendBool(dst, c.Create != nil)
	if cd := c.Create; cd != nil {
		dst = binary.AppendVarint(dst, cd.Amount)
		dst = wire.AppendString(dst, cd.Currency)
		dst = wire.AppendString(dst, cd.Description)
		dst = wire.AppendString(dst, cd.Descriptor)
		dst = wire.AppendString(dst, cd.Website)
		dst = wire.AppendString(dst, cd.ProcessingMID)
		dst = wire.AppendString(dst, cd.SubscriptionID)
		dst = wire.AppendString(dst, cd.CallbackURL)
		dst = wire.AppendString(dst, cd.SuccessURL)
		dst = wire.AppendString(dst, cd.FailURL)
		dst = binary.AppendVarint(dst, cd.SettleDelayHours)
		dst = appendSource(dst, &cd.Source)
		dst = wire.AppendBytes(dst, cd.SealedCard)
		dst = appendThreeDSPtr(dst, cd.ThreeDS)
		dst = wire.AppendString(dst, cd.ReplayKey)
		dst = wire.AppendString(dst, cd.WalletAuthMethod)
		dst = wire.AppendString(dst, cd.WalletECI)
		dst = wire.AppendString(dst, cd.WalletCryptogram)
		dst = wire.AppendBool(dst, cd.ThreeDSForce)
		dst = wire.AppendBool(dst, cd.AttemptNonSecure)
	}
	dst = wire.AppendBool(dst, c.Outcome != nil)
	if r := c.Outcome; r != nil {
		dst = wire.AppendBool(dst, r.Approved)
		dst = wire.AppendString(dst, r.AuthCode)
		dst = wire.AppendString(dst, r.AVSCheck)
		dst = wire.AppendString(dst, r.CVVCheck)
		dst = wire.AppendString(dst, r.RiskDecision)
		dst = wire.AppendString(dst, r.DeclineCode)
		dst = wire.AppendString(dst, r.DeclineMessage)
		dst = wire.AppendString(dst, r.PaymentToken)
		dst = binary.AppendVarint(dst, r.TokenExpiresAt)
		dst = binary.AppendVarint(dst, r.AutoSettleAt)
	}
	dst = wire.AppendBool(dst, c.Form != nil)
	if f := c.Form; f != nil {
		dst = wire.AppendString(dst, f.TokenHash)
		dst = binary.AppendVarint(dst, f.ExpiresAt)
		dst = wire.AppendString(dst, f.Language)
	}
	dst = wire.AppendBool(dst, c.Submit != nil)
	if s := c.Submit; s != nil {
		dst = appendSource(dst, &s.Source)
		dst = wire.AppendBytes(dst, s.SealedCard)
	}
	dst = wire.AppendBool(dst, c.Challenge != nil)
	if ch := c.Challenge; ch != nil {
		dst = wire.AppendString(dst, ch.ID)
		dst = wire.AppendString(dst, ch.RedirectURL)
		dst = binary.AppendVarint(dst, ch.ExpiresAt)
	}
	dst = wire.AppendBool(dst, c.ThreeDSResult != nil)
	if r := c.ThreeDSResult; r != nil {
		dst = wire.AppendString(dst, r.ChallengeID)
		dst = wire.AppendBool(dst, r.Authenticated)
		dst = appendThreeDSPtr(dst, r.Result)
		dst = wire.AppendString(dst, r.DeclineCode)
		dst = wire.AppendString(dst, r.DeclineMessage)
	}
	var email string // version 2: the create's customer e-mail, last
	if c.Create != nil {
		email = c.Create.CustomerEmail
	}
	return wire.AppendString(dst, email)
}

// createCommand and outcomeCommand hold a command with its data in one
// allocation: a charge's two commands, decoded on every replica.
type createCommand struct {
	cmd    order.Command
	create order.CreateData
}

type outcomeCommand struct {
	cmd     order.Command
	outcome order.OutcomeData
}

// DecodeCommand decodes what AppendCommand encoded. b is not retained.
func DecodeCommand(b []byte) (*order.Command, error) {
	version := formatVersion(b, commandFormatV2, commandFormatV1)
	d := newDecoder(b, version, "command")
	// The fields before Create go to hdr, copied into the command once it
	// is known whether it shares an allocation with its data.
	var hdr order.Command
	hdr.Kind = order.Kind(d.Str())
	hdr.Time = d.Varint()
	hdr.Merchant = d.Str()
	hdr.OrderID = d.Str()
	hdr.TxnID = d.Str()
	hdr.Amount = d.Varint()
	hdr.ARN = d.Str()
	hdr.RefundReasonCode = d.Str()
	hdr.Auto = d.Bool()
	hdr.IdempotencyKey = d.Str()
	hdr.RequestHash = d.Str()

	var c *order.Command
	if d.Present() {
		blk := &createCommand{cmd: hdr}
		c = &blk.cmd
		cd := &blk.create
		cd.Amount = d.Varint()
		cd.Currency = d.Str()
		cd.Description = d.Str()
		cd.Descriptor = d.Str()
		cd.Website = d.Str()
		cd.ProcessingMID = d.Str()
		cd.SubscriptionID = d.Str()
		cd.CallbackURL = d.Str()
		cd.SuccessURL = d.Str()
		cd.FailURL = d.Str()
		cd.SettleDelayHours = d.Varint()
		d.source(&cd.Source)
		cd.SealedCard = d.Bytes()
		cd.ThreeDS = d.threeDSPtr()
		cd.ReplayKey = d.Str()
		cd.WalletAuthMethod = d.Str()
		cd.WalletECI = d.Str()
		cd.WalletCryptogram = d.Str()
		cd.ThreeDSForce = d.Bool()
		cd.AttemptNonSecure = d.Bool()
		c.Create = cd
	}
	if d.Present() {
		var r *order.OutcomeData
		if c == nil {
			blk := &outcomeCommand{cmd: hdr}
			c, r = &blk.cmd, &blk.outcome
		} else {
			r = &order.OutcomeData{}
		}
		r.Approved = d.Bool()
		r.AuthCode = d.Str()
		r.AVSCheck = d.Str()
		r.CVVCheck = d.Str()
		r.RiskDecision = d.Str()
		r.DeclineCode = d.Str()
		r.DeclineMessage = d.Str()
		r.PaymentToken = d.Str()
		r.TokenExpiresAt = d.Varint()
		r.AutoSettleAt = d.Varint()
		c.Outcome = r
	}
	if c == nil {
		c = new(order.Command)
		*c = hdr
	}
	if d.Present() {
		c.Form = &order.FormData{TokenHash: d.Str(), ExpiresAt: d.Varint(), Language: d.Str()}
	}
	if d.Present() {
		s := &order.SubmitData{}
		d.source(&s.Source)
		s.SealedCard = d.Bytes()
		c.Submit = s
	}
	if d.Present() {
		c.Challenge = &order.ChallengeData{ID: d.Str(), RedirectURL: d.Str(), ExpiresAt: d.Varint()}
	}
	if d.Present() {
		r := &order.ThreeDSResultData{}
		r.ChallengeID = d.Str()
		r.Authenticated = d.Bool()
		r.Result = d.threeDSPtr()
		r.DeclineCode = d.Str()
		r.DeclineMessage = d.Str()
		c.ThreeDSResult = r
	}
	if version >= commandFormatV2 {
		if email := d.Str(); c.Create != nil {
			c.Create.CustomerEmail = email
		}
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// Shared parts.

func appendTxn(dst []byte, t *order.Transaction) []byte {
	dst = wire.AppendString(dst, t.ID)
	dst = binary.AppendVarint(dst, t.CreatedAt)
	dst = binary.AppendVarint(dst, t.UpdatedAt)
	dst = wire.AppendString(dst, string(t.Operation))
	dst = wire.AppendString(dst, string(t.Status))
	dst = wire.AppendString(dst, t.Currency)
	dst = binary.AppendVarint(dst, t.Amount)
	dst = wire.AppendString(dst, t.AuthCode)
	dst = wire.AppendString(dst, t.ARN)
	return wire.AppendString(dst, t.RefundReasonCode)
}

// txnBytesMin is the smallest encoded Transaction (ten one-byte fields):
// a count larger than the remaining bytes allow is refused before it is
// allocated.
const txnBytesMin = 10

func (d *decoder) txn(t *order.Transaction) {
	t.ID = d.Str()
	t.CreatedAt = d.Varint()
	t.UpdatedAt = d.Varint()
	t.Operation = order.Operation(d.Str())
	t.Status = order.TxnStatus(d.Str())
	t.Currency = d.Str()
	t.Amount = d.Varint()
	t.AuthCode = d.Str()
	t.ARN = d.Str()
	t.RefundReasonCode = d.Str()
}

func appendThreeDSPtr(dst []byte, t *order.ThreeDS) []byte {
	dst = wire.AppendBool(dst, t != nil)
	if t == nil {
		return dst
	}
	dst = wire.AppendString(dst, t.Enrolled)
	dst = wire.AppendString(dst, t.AuthenticationResult)
	dst = wire.AppendString(dst, t.Version)
	dst = wire.AppendString(dst, t.ECI)
	dst = wire.AppendString(dst, t.XID)
	return wire.AppendString(dst, t.CAVV)
}

func (d *decoder) threeDSPtr() *order.ThreeDS {
	if !d.Present() {
		return nil
	}
	return &order.ThreeDS{
		Enrolled: d.Str(), AuthenticationResult: d.Str(), Version: d.Str(),
		ECI: d.Str(), XID: d.Str(), CAVV: d.Str(),
	}
}

// AppendTokenGrant appends the binary encoding of g to dst.
func AppendTokenGrant(dst []byte, g *order.TokenGrant) []byte {
	dst = append(dst, tokenGrantFormatV1)
	dst = wire.AppendString(dst, g.Merchant)
	dst = wire.AppendString(dst, g.CardID)
	dst = binary.AppendVarint(dst, g.ExpiresAt)
	return appendSource(dst, &g.Source)
}

// DecodeTokenGrant decodes what AppendTokenGrant encoded. b is not retained.
func DecodeTokenGrant(b []byte) (*order.TokenGrant, error) {
	d := newDecoder(b, tokenGrantFormatV1, "token grant")
	g := &order.TokenGrant{}
	g.Merchant = d.Str()
	g.CardID = d.Str()
	g.ExpiresAt = d.Varint()
	d.source(&g.Source)
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return g, nil
}

func appendSource(dst []byte, s *order.PaymentSource) []byte {
	dst = wire.AppendString(dst, s.Type)
	dst = wire.AppendString(dst, s.CardID)
	dst = wire.AppendString(dst, s.PaymentToken)
	dst = binary.AppendVarint(dst, s.TokenExpiresAt)
	dst = wire.AppendString(dst, s.Issuer)
	dst = wire.AppendString(dst, s.BIN)
	dst = wire.AppendString(dst, s.Brand)
	dst = wire.AppendString(dst, s.CardType)
	dst = wire.AppendString(dst, s.ExpMonth)
	dst = wire.AppendString(dst, s.ExpYear)
	dst = wire.AppendString(dst, s.HolderName)
	dst = wire.AppendString(dst, s.Masked)
	dst = wire.AppendString(dst, s.IssuerCountry)
	dst = wire.AppendBool(dst, s.Billing != nil)
	if a := s.Billing; a != nil {
		dst = wire.AppendString(dst, a.Line1)
		dst = wire.AppendString(dst, a.Line2)
		dst = wire.AppendString(dst, a.City)
		dst = wire.AppendString(dst, a.State)
		dst = wire.AppendString(dst, a.Zip)
		dst = wire.AppendString(dst, a.Country)
	}
	return dst
}

func (d *decoder) source(s *order.PaymentSource) {
	s.Type = d.Str()
	s.CardID = d.Str()
	s.PaymentToken = d.Str()
	s.TokenExpiresAt = d.Varint()
	s.Issuer = d.Str()
	s.BIN = d.Str()
	s.Brand = d.Str()
	s.CardType = d.Str()
	s.ExpMonth = d.Str()
	s.ExpYear = d.Str()
	s.HolderName = d.Str()
	s.Masked = d.Str()
	s.IssuerCountry = d.Str()
	if d.Present() {
		s.Billing = &order.Address{
			Line1: d.Str(), Line2: d.Str(), City: d.Str(),
			State: d.Str(), Zip: d.Str(), Country: d.Str(),
		}
	}
}

// decoder is the wire decoder with the order types' shared parts below.
type decoder struct{ wire.Decoder }

func newDecoder(b []byte, version byte, what string) decoder {
	return decoder{wire.NewDecoder(b, version, what)}
}
