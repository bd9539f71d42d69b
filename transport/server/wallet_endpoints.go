package server

import (
	"errors"
	"strings"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// WalletDecrypter verifies and decrypts wallet payment credentials
// (walleta-pay, walletb-pay). It is wired by the node from the wallet flags.
// Both methods are safe for concurrent use, keep no state and do no I/O.
// Every error wraps a sentinel of package wallet, or is ErrWalletOff; none
// carries key material or the card number.
type WalletDecrypter interface {
	DecryptWalletA(ps *api.PaymentSource) (*wallet.Payment, error)
	DecryptWalletB(ps *api.PaymentSource) (*wallet.Payment, error)
}

// ErrWalletOff: this node has no keys for the wallet (no wallet flags and
// no --dev).
var ErrWalletOff = errors.New("wallet payments are not configured")

// WalletKeys is the WalletDecrypter of a node: the configuration of each
// wallet, nil when that wallet is off.
type WalletKeys struct {
	A *walleta.Config
	B *walletb.Config
}

// DecryptWalletA verifies and decrypts a walleta-pay payment_source.
func (k WalletKeys) DecryptWalletA(ps *api.PaymentSource) (*wallet.Payment, error) {
	if k.A == nil {
		return nil, ErrWalletOff
	}
	t := walleta.Token{Version: deref(ps.Version), Data: deref(ps.Data), Signature: deref(ps.Signature)}
	if h := ps.Header; h != nil {
		t.Header = walleta.Header{
			EphemeralPublicKey: deref(h.EphemeralPublicKey), WrappedKey: deref(h.WrappedKey),
			PublicKeyHash: deref(h.PublicKeyHash), TransactionID: deref(h.TransactionID),
			ApplicationData: deref(h.ApplicationData),
		}
	}
	return walleta.Decrypt(*k.A, t)
}

// DecryptWalletB verifies and decrypts a walletb-pay payment_source.
func (k WalletKeys) DecryptWalletB(ps *api.PaymentSource) (*wallet.Payment, error) {
	if k.B == nil {
		return nil, ErrWalletOff
	}
	t := walletb.Token{ProtocolVersion: api.WalletBProtocolVersion(ps), Signature: deref(ps.Signature),
		SignedMessage: deref(ps.SignedMessage)}
	if isk := ps.IntermediateSigningKey; isk != nil {
		t.IntermediateSigningKey = &walletb.IntermediateSigningKey{SignedKey: deref(isk.SignedKey), Signatures: isk.Signatures}
	}
	return walletb.Decrypt(*k.B, t)
}

// walletEndpoints are POST /walleta-pay and /walletb-pay (interface 4.4).
func (s *Server) walletEndpoints() map[string]endpoint {
	eps := map[string]endpoint{}
	for _, w := range []string{wallet.WalletA, wallet.WalletB} {
		eps[w] = operation(
			ignoreNow(func(r *api.WalletRequest) *apierr.Error { return api.ValidateWallet(r, w) }),
			func(s *Server, c *call, r *api.WalletRequest) answer { return s.walletPay(c, r, w) },
		)
	}
	return eps
}

// walletPay creates an order from a wallet credential. Order of checks,
// after validation (which includes callback_url's guard, as on charge):
//
//  1. the order exists: the same request returns it, another is 409 5.06
//     (contract section 5) — before any token check, so an idempotent
//     repeat still answers after the token has expired or been recorded;
//  2. the wallet is configured, the token verifies and decrypts;
//  3. walleta-pay: the amount and currency the device signed are the
//     order's; walletb-pay ECv2: gatewayMerchantId is this merchant's id;
//  4. the token's transaction id was not used by another order (a fast
//     answer from this node's store; the FSM decides again on the committed
//     command, so two racing requests cannot both pass);
//  5. the order actor creates and authorises it like a card charge.
//
// Every refusal in 2 to 4 is 422, code 2.01, attribute payment_source
// (contract section 9), and creates nothing.
func (s *Server) walletPay(c *call, r *api.WalletRequest, walletType string) answer {
	merchant, orderID, hash := c.merchant.ID, *r.OrderID, s.requestHash(c.body)
	cur, err := s.cfg.Store.GetOrder(merchant, orderID)
	if err != nil {
		return answer{err: s.errorFor(walletType, err)}
	}
	if cur != nil {
		return s.existingOrder(walletType, cur, hash)
	}

	p, aerr := s.decryptWallet(walletType, r.PaymentSource)
	if aerr != nil {
		s.cfg.Logger.Info("wallet token refused", "op", walletType, "merchant_id", merchant,
			"order_id", orderID, "reason", aerr.Error())
		return answer{err: aerr}
	}
	if aerr := walletMatchesOrder(p, r, merchant); aerr != nil {
		return answer{err: aerr}
	}
	used, err := s.cfg.Store.WalletReplay(p.ReplayKey())
	if err != nil {
		return answer{err: s.errorFor(walletType, err)}
	}
	// A record naming this very order is the first attempt of this request
	// racing us: the actor answers with the order (or 409).
	if used != nil && (used.Merchant != merchant || used.OrderID != orderID) {
		return answer{err: sourceError("payment_source has already been used: the wallet transaction id was seen before")}
	}

	data := createData(&r.OrderFields, *r.Settle.DelayHours)
	data.SuccessURL, data.FailURL = "", "" // not part of wallet payments (interface 4.4)
	data.Source = order.PaymentSource{Type: walletType}
	data.ReplayKey = p.ReplayKey()
	data.WalletAuthMethod, data.WalletECI, data.WalletCryptogram = p.AuthMethod, p.ECI, p.Cryptogram
	msg := &actors.Create{
		Merchant: merchant, OrderID: orderID, RequestHash: hash, Data: data,
		// The card is sealed by the vault in the actor, exactly like a card
		// charge's; wallets give no holder name.
		Card:       &vault.Card{PAN: p.PAN, ExpMonth: p.ExpMonth, ExpYear: p.ExpYear},
		Cryptogram: p.Cryptogram, ECI: p.ECI,
	}
	res, err := s.cfg.Registry.Request(actors.Key{Merchant: merchant, OrderID: orderID}, msg, s.cfg.RequestTimeout)
	return s.reply(walletType, res, err)
}

// existingOrder answers an order-creating request whose order_id exists:
// the order for the same request, 409 5.06 for another (as the actor does).
func (s *Server) existingOrder(op string, cur *order.Order, hash string) answer {
	_, out := order.Apply(cur, &order.Command{Kind: order.KindCreate, RequestHash: hash})
	if out.Replay {
		return s.reply(op, &actors.Reply{Order: cur, TxnID: out.TxnID}, nil)
	}
	return s.reply(op, &actors.Reply{Order: cur, Reject: out.Reject}, nil)
}

func (s *Server) decryptWallet(walletType string, ps *api.PaymentSource) (*wallet.Payment, *apierr.Error) {
	if s.cfg.Wallets == nil {
		return nil, sourceError(walletType + " payments are not configured on this gateway")
	}
	var p *wallet.Payment
	var err error
	if walletType == wallet.WalletA {
		p, err = s.cfg.Wallets.DecryptWalletA(ps)
	} else {
		p, err = s.cfg.Wallets.DecryptWalletB(ps)
	}
	if err != nil {
		return nil, walletError(walletType, err)
	}
	return p, nil
}

// walletError maps a verification failure to the public message. The
// detailed error goes to the log; it names fields, never their values.
func walletError(walletType string, err error) *apierr.Error {
	switch {
	case errors.Is(err, ErrWalletOff), errors.Is(err, wallet.ErrConfig):
		return sourceError(walletType + " payments are not configured on this gateway")
	case errors.Is(err, wallet.ErrUnsupported):
		if walletType == wallet.WalletB {
			return sourceError("payment_source.protocolVersion is not supported: use ECv1 or ECv2 (ECv0, assumed when it is unset, is a legacy format this gateway does not accept)")
		}
		return sourceError("payment_source.version is not supported: use EC_v1 or RSA_v1")
	case errors.Is(err, wallet.ErrFormat):
		return sourceError("payment_source is not a well-formed " + walletType + " token")
	case errors.Is(err, wallet.ErrSignature):
		return sourceError("payment_source signature does not verify")
	case errors.Is(err, wallet.ErrChain):
		return sourceError("payment_source signing certificate is not trusted")
	case errors.Is(err, wallet.ErrExpired):
		return sourceError("payment_source has expired")
	case errors.Is(err, wallet.ErrWrongMerchant):
		return sourceError("payment_source is encrypted for another merchant's key")
	case errors.Is(err, wallet.ErrDecrypt):
		return sourceError("payment_source could not be decrypted")
	}
	return sourceError("payment_source could not be verified")
}

// walletMatchesOrder checks what the token binds beside the card:
// walleta-pay's signed amount and currency must be the order's; a
// walletb-pay ECv2 token's gatewayMerchantId must be the merchant's id (the
// <GATEWAY_MERCHANT_ID> of interface 4.4 is the merchant_id), so a token
// made at one merchant's checkout cannot pay another's order. ECv1 tokens
// carry no merchant.
func walletMatchesOrder(p *wallet.Payment, r *api.WalletRequest, merchantID string) *apierr.Error {
	switch p.Wallet {
	case wallet.WalletA:
		if p.Amount != *r.Amount {
			return sourceError("payment_source amount does not match the order amount")
		}
		// The token carries the numeric code; compare codes, not names.
		c, ok := currency.Lookup(strings.ToUpper(*r.Currency))
		if !ok || p.CurrencyNumeric != c.Numeric {
			return sourceError("payment_source currency does not match the order currency")
		}
	case wallet.WalletB:
		if p.Version == walletb.VersionECv2 && p.GatewayMerchantID != merchantID {
			return sourceError("payment_source was issued for another merchant (gatewayMerchantId)")
		}
	}
	return nil
}

func sourceError(msg string) *apierr.Error {
	return apierr.New(apierr.Invalid, "payment_source", msg)
}
