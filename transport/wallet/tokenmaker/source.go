package tokenmaker

import (
	"encoding/json"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// PaymentSourceA is the payment_source of a POST walleta-pay request
// carrying t (interface 4.4): the token's own fields plus "type". The
// token's JSON names are the wire names.
func PaymentSourceA(t walleta.Token) map[string]any {
	return paymentSource(wallet.WalletA, t)
}

// PaymentSourceB is the payment_source of a POST walletb-pay request
// carrying t, with the ECv2 intermediateSigningKey when t has one.
func PaymentSourceB(t walletb.Token) map[string]any {
	return paymentSource(wallet.WalletB, t)
}

func paymentSource(walletType string, t any) map[string]any {
	b, err := json.Marshal(t)
	if err != nil {
		panic("tokenmaker: encode token: " + err.Error()) // plain structs of strings
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		panic("tokenmaker: decode token: " + err.Error())
	}
	m["type"] = walletType
	return m
}
