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
// as strings). A run of string fields is one wire.AppendStrings on the
// append side and one Decoder.Strs on the decode side, naming the same
// fields in the same order.
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
	orderFormatV1   byte = 1
	orderFormatV2   byte = 2
	commandFormatV1 byte = 1
	commandFormatV2 byte = 2
	// Version 3 appends the acquirer movements (order/move.go) after every
	// version-2 field: an order's AuthTrace, Moves and its transactions'
	// declines; a command's Move and its outcome's Trace. A record without
	// them is still written as version 2, byte for byte.
	orderFormatV3      byte = 3
	commandFormatV3    byte = 3
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

// versionByte is the version a record is written in: the newer one only
// when the record holds something only it encodes, so that a record without
// it stays, byte for byte, what the older version wrote.
func versionByte(needsNewer bool, newer, older byte) byte {
	if needsNewer {
		return newer
	}
	return older
}

// ErrCodec is wrapped by every decoding error.
var ErrCodec = wire.ErrCodec

// AppendOrder appends the binary encoding of o to dst.
func AppendOrder(dst []byte, o *order.Order) []byte {
	v3 := orderNeedsV3(o)
	dst = append(dst, versionByte(v3, orderFormatV3, orderFormatV2))
	dst = wire.AppendStrings(dst, o.Merchant, o.ID)
	dst = binary.AppendVarint(dst, o.Amount)
	dst = wire.AppendString(dst, o.Currency)
	dst = wire.AppendString(dst, string(o.Status))
	dst = binary.AppendVarint(dst, o.SettledAmount)
	dst = binary.AppendVarint(dst, o.RefundedAmount)
	dst = wire.AppendStrings(dst, o.Description, o.Descriptor)
	dst = wire.AppendBool(dst, o.Decline != nil)
	if o.Decline != nil {
		dst = wire.AppendStrings(dst, o.Decline.Code, o.Decline.Message)
	}
	dst = wire.AppendStrings(dst, o.RiskDecision, o.AVSCheck, o.CVVCheck)
	dst = appendThreeDSPtr(dst, o.ThreeDS)
	dst = wire.AppendStrings(dst, o.Website, o.ProcessingMID, o.SubscriptionID, o.RedirectURL, o.CallbackURL,
		o.SuccessURL, o.FailURL)
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
	dst = wire.AppendStrings(dst, o.WalletAuthMethod, o.WalletECI, o.FormTokenHash)
	dst = binary.AppendVarint(dst, o.FormExpiresAt)
	dst = wire.AppendString(dst, o.Language)
	dst = wire.AppendBool(dst, o.ThreeDSForce)
	dst = wire.AppendBool(dst, o.AttemptNonSecure)
	dst = wire.AppendString(dst, o.CustomerEmail)
	if !v3 {
		return dst
	}
	dst = wire.AppendString(dst, o.AuthTrace)
	dst = binary.AppendUvarint(dst, uint64(len(o.Moves)))
	for i := range o.Moves {
		m := &o.Moves[i]
		dst = wire.AppendString(dst, m.TxnID)
		dst = wire.AppendString(dst, string(m.Kind))
		dst = binary.AppendVarint(dst, m.Amount)
		dst = wire.AppendStrings(dst, m.STAN, m.RRN)
		dst = binary.AppendVarint(dst, m.At)
		dst = wire.AppendString(dst, m.IdempotencyKey)
	}
	for i := range o.Txns {
		d := o.Txns[i].Decline
		dst = wire.AppendBool(dst, d != nil)
		if d != nil {
			dst = wire.AppendStrings(dst, d.Code, d.Message)
		}
	}
	return dst
}

// orderNeedsV3 reports whether o has anything only version 3 encodes.
func orderNeedsV3(o *order.Order) bool {
	if o.AuthTrace != "" || len(o.Moves) > 0 {
		return true
	}
	for i := range o.Txns {
		if o.Txns[i].Decline != nil {
			return true
		}
	}
	return false
}

// moveBytesMin is the smallest encoded Movement (seven one-byte fields).
const moveBytesMin = 7

// DecodeOrder decodes what AppendOrder encoded. b is not retained.
func DecodeOrder(b []byte) (*order.Order, error) {
	version := formatVersion(b, orderFormatV3, orderFormatV2, orderFormatV1)
	d := newDecoder(b, version, "order")
	o := &order.Order{}
	d.Strs(&o.Merchant, &o.ID)
	o.Amount = d.Varint()
	o.Currency = d.Str()
	o.Status = order.Status(d.Str())
	o.SettledAmount = d.Varint()
	o.RefundedAmount = d.Varint()
	d.Strs(&o.Description, &o.Descriptor)
	if d.Present() {
		o.Decline = &order.Decline{Code: d.Str(), Message: d.Str()}
	}
	d.Strs(&o.RiskDecision, &o.AVSCheck, &o.CVVCheck)
	o.ThreeDS = d.threeDSPtr()
	d.Strs(&o.Website, &o.ProcessingMID, &o.SubscriptionID, &o.RedirectURL, &o.CallbackURL, &o.SuccessURL,
		&o.FailURL)
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
	d.Strs(&o.WalletAuthMethod, &o.WalletECI, &o.FormTokenHash)
	o.FormExpiresAt = d.Varint()
	o.Language = d.Str()
	o.ThreeDSForce = d.Bool()
	o.AttemptNonSecure = d.Bool()
	if version >= orderFormatV2 {
		o.CustomerEmail = d.Str()
	}
	if version >= orderFormatV3 {
		o.AuthTrace = d.Str()
		if n := d.Count(moveBytesMin); n > 0 {
			o.Moves = make([]order.Movement, n)
			for i := range o.Moves {
				m := &o.Moves[i]
				m.TxnID, m.Kind, m.Amount = d.Str(), order.MoveKind(d.Str()), d.Varint()
				m.STAN, m.RRN, m.At = d.Str(), d.Str(), d.Varint()
				m.IdempotencyKey = d.Str()
			}
		}
		for i := range o.Txns {
			if d.Present() {
				o.Txns[i].Decline = &order.Decline{Code: d.Str(), Message: d.Str()}
			}
		}
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return o, nil
}

// AppendCommand appends the binary encoding of c to dst.
func AppendCommand(dst []byte, c *order.Command) []byte {
	v3 := c.Move != nil || c.Outcome != nil && c.Outcome.Trace != ""
	dst = append(dst, versionByte(v3, commandFormatV3, commandFormatV2))
	dst = wire.AppendString(dst, string(c.Kind))
	dst = binary.AppendVarint(dst, c.Time)
	dst = wire.AppendStrings(dst, c.Merchant, c.OrderID, c.TxnID)
	dst = binary.AppendVarint(dst, c.Amount)
	dst = wire.AppendStrings(dst, c.ARN, c.RefundReasonCode)
	dst = wire.AppendBool(dst, c.Auto)
	dst = wire.AppendStrings(dst, c.IdempotencyKey, c.RequestHash)

	dst = wire.AppendBool(dst, c.Create != nil)
	if cd := c.Create; cd != nil {
		dst = binary.AppendVarint(dst, cd.Amount)
		dst = wire.AppendStrings(dst, cd.Currency, cd.Description, cd.Descriptor, cd.Website, cd.ProcessingMID,
			cd.SubscriptionID, cd.CallbackURL, cd.SuccessURL, cd.FailURL)
		dst = binary.AppendVarint(dst, cd.SettleDelayHours)
		dst = appendSource(dst, &cd.Source)
		dst = wire.AppendBytes(dst, cd.SealedCard)
		dst = appendThreeDSPtr(dst, cd.ThreeDS)
		dst = wire.AppendStrings(dst, cd.ReplayKey, cd.WalletAuthMethod, cd.WalletECI, cd.WalletCryptogram)
		dst = wire.AppendBool(dst, cd.ThreeDSForce)
		dst = wire.AppendBool(dst, cd.AttemptNonSecure)
	}
	dst = wire.AppendBool(dst, c.Outcome != nil)
	if r := c.Outcome; r != nil {
		dst = wire.AppendBool(dst, r.Approved)
		dst = wire.AppendStrings(dst, r.AuthCode, r.AVSCheck, r.CVVCheck, r.RiskDecision, r.DeclineCode,
			r.DeclineMessage, r.PaymentToken)
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
		dst = wire.AppendStrings(dst, ch.ID, ch.RedirectURL)
		dst = binary.AppendVarint(dst, ch.ExpiresAt)
	}
	dst = wire.AppendBool(dst, c.ThreeDSResult != nil)
	if r := c.ThreeDSResult; r != nil {
		dst = wire.AppendString(dst, r.ChallengeID)
		dst = wire.AppendBool(dst, r.Authenticated)
		dst = appendThreeDSPtr(dst, r.Result)
		dst = wire.AppendStrings(dst, r.DeclineCode, r.DeclineMessage)
	}
	var email string // version 2: the create's customer e-mail, last
	if c.Create != nil {
		email = c.Create.CustomerEmail
	}
	dst = wire.AppendString(dst, email)
	if !v3 {
		return dst
	}
	dst = wire.AppendBool(dst, c.Move != nil)
	if m := c.Move; m != nil {
		dst = wire.AppendStrings(dst, m.STAN, m.RRN)
	}
	if c.Outcome != nil {
		dst = wire.AppendString(dst, c.Outcome.Trace)
	}
	return dst
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
	version := formatVersion(b, commandFormatV3, commandFormatV2, commandFormatV1)
	d := newDecoder(b, version, "command")
	// The fields before Create go to hdr, copied into the command once it
	// is known whether it shares an allocation with its data.
	var hdr order.Command
	hdr.Kind = order.Kind(d.Str())
	hdr.Time = d.Varint()
	d.Strs(&hdr.Merchant, &hdr.OrderID, &hdr.TxnID)
	hdr.Amount = d.Varint()
	d.Strs(&hdr.ARN, &hdr.RefundReasonCode)
	hdr.Auto = d.Bool()
	d.Strs(&hdr.IdempotencyKey, &hdr.RequestHash)

	var c *order.Command
	if d.Present() {
		blk := &createCommand{cmd: hdr}
		c = &blk.cmd
		cd := &blk.create
		cd.Amount = d.Varint()
		d.Strs(&cd.Currency, &cd.Description, &cd.Descriptor, &cd.Website, &cd.ProcessingMID,
			&cd.SubscriptionID, &cd.CallbackURL, &cd.SuccessURL, &cd.FailURL)
		cd.SettleDelayHours = d.Varint()
		d.source(&cd.Source)
		cd.SealedCard = d.Bytes()
		cd.ThreeDS = d.threeDSPtr()
		d.Strs(&cd.ReplayKey, &cd.WalletAuthMethod, &cd.WalletECI, &cd.WalletCryptogram)
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
		d.Strs(&r.AuthCode, &r.AVSCheck, &r.CVVCheck, &r.RiskDecision, &r.DeclineCode, &r.DeclineMessage,
			&r.PaymentToken)
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
		d.Strs(&r.DeclineCode, &r.DeclineMessage)
		c.ThreeDSResult = r
	}
	if version >= commandFormatV2 {
		if email := d.Str(); c.Create != nil {
			c.Create.CustomerEmail = email
		}
	}
	if version >= commandFormatV3 {
		if d.Present() {
			c.Move = &order.Move{STAN: d.Str(), RRN: d.Str()}
		}
		if c.Outcome != nil {
			c.Outcome.Trace = d.Str()
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
	return wire.AppendStrings(dst, t.AuthCode, t.ARN, t.RefundReasonCode)
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
	d.Strs(&t.AuthCode, &t.ARN, &t.RefundReasonCode)
}

func appendThreeDSPtr(dst []byte, t *order.ThreeDS) []byte {
	dst = wire.AppendBool(dst, t != nil)
	if t == nil {
		return dst
	}
	return wire.AppendStrings(dst, t.Enrolled, t.AuthenticationResult, t.Version, t.ECI, t.XID, t.CAVV)
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
	dst = wire.AppendStrings(dst, g.Merchant, g.CardID)
	dst = binary.AppendVarint(dst, g.ExpiresAt)
	return appendSource(dst, &g.Source)
}

// DecodeTokenGrant decodes what AppendTokenGrant encoded. b is not retained.
func DecodeTokenGrant(b []byte) (*order.TokenGrant, error) {
	d := newDecoder(b, tokenGrantFormatV1, "token grant")
	g := &order.TokenGrant{}
	d.Strs(&g.Merchant, &g.CardID)
	g.ExpiresAt = d.Varint()
	d.source(&g.Source)
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return g, nil
}

func appendSource(dst []byte, s *order.PaymentSource) []byte {
	dst = wire.AppendStrings(dst, s.Type, s.CardID, s.PaymentToken)
	dst = binary.AppendVarint(dst, s.TokenExpiresAt)
	dst = wire.AppendStrings(dst, s.Issuer, s.BIN, s.Brand, s.CardType, s.ExpMonth, s.ExpYear, s.HolderName,
		s.Masked, s.IssuerCountry)
	dst = wire.AppendBool(dst, s.Billing != nil)
	if a := s.Billing; a != nil {
		dst = wire.AppendStrings(dst, a.Line1, a.Line2, a.City, a.State, a.Zip, a.Country)
	}
	return dst
}

func (d *decoder) source(s *order.PaymentSource) {
	d.Strs(&s.Type, &s.CardID, &s.PaymentToken)
	s.TokenExpiresAt = d.Varint()
	d.Strs(&s.Issuer, &s.BIN, &s.Brand, &s.CardType, &s.ExpMonth, &s.ExpYear, &s.HolderName, &s.Masked,
		&s.IssuerCountry)
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
