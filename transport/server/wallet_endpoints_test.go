package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/paygate/gateway/transport/api"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/wallet"
)

func TestWalletErrorsArePaymentSource422(t *testing.T) {
	for _, err := range []error{
		wallet.ErrFormat, wallet.ErrUnsupported, wallet.ErrSignature, wallet.ErrChain, wallet.ErrExpired,
		wallet.ErrDecrypt, wallet.ErrWrongMerchant, wallet.ErrConfig, ErrWalletOff, errors.New("other"),
	} {
		for _, w := range []string{wallet.WalletA, wallet.WalletB} {
			e := walletError(w, fmt.Errorf("%w: detail with field names", err))
			if e.Code != apierr.Invalid || len(e.Messages) != 1 || len(e.Messages["payment_source"]) != 1 {
				t.Errorf("%s %v: %+v", w, err, e)
			}
		}
	}
	if m := walletError(wallet.WalletB, wallet.ErrUnsupported).Messages["payment_source"][0]; m == "" ||
		m == walletError(wallet.WalletA, wallet.ErrUnsupported).Messages["payment_source"][0] {
		t.Errorf("ECv0 message: %q", m)
	}
}

func TestWalletKeysOff(t *testing.T) {
	var k WalletKeys
	if _, err := k.DecryptWalletA(&api.PaymentSource{}); !errors.Is(err, ErrWalletOff) {
		t.Errorf("walleta-pay without config: %v", err)
	}
	if _, err := k.DecryptWalletB(&api.PaymentSource{}); !errors.Is(err, ErrWalletOff) {
		t.Errorf("walletb-pay without config: %v", err)
	}
}

func TestWalletMatchesOrder(t *testing.T) {
	amount, usd, jpy, xad := int64(1000), "USD", "jpy", "XAD"
	req := func(cur *string) *api.WalletRequest {
		return &api.WalletRequest{OrderFields: api.OrderFields{Amount: &amount, Currency: cur}}
	}
	cases := []struct {
		name string
		p    wallet.Payment
		r    *api.WalletRequest
		ok   bool
	}{
		{"walleta same", wallet.Payment{Wallet: wallet.WalletA, Amount: 1000, Currency: "USD", CurrencyNumeric: "840"}, req(&usd), true},
		{"walleta lower-case order currency", wallet.Payment{Wallet: wallet.WalletA, Amount: 1000, Currency: "JPY", CurrencyNumeric: "392"}, req(&jpy), true},
		{"walleta XAD", wallet.Payment{Wallet: wallet.WalletA, Amount: 1000, Currency: "XAD", CurrencyNumeric: "396"}, req(&xad), true},
		{"walleta amount", wallet.Payment{Wallet: wallet.WalletA, Amount: 999, Currency: "USD", CurrencyNumeric: "840"}, req(&usd), false},
		{"walleta currency", wallet.Payment{Wallet: wallet.WalletA, Amount: 1000, Currency: "EUR", CurrencyNumeric: "978"}, req(&usd), false},
		{"walleta unknown numeric", wallet.Payment{Wallet: wallet.WalletA, Amount: 1000, CurrencyNumeric: "999"}, req(&usd), false},
		{"walletb ECv2 merchant", wallet.Payment{Wallet: wallet.WalletB, Version: "ECv2", GatewayMerchantID: "mer_1"}, req(&usd), true},
		{"walletb ECv2 other merchant", wallet.Payment{Wallet: wallet.WalletB, Version: "ECv2", GatewayMerchantID: "mer_2"}, req(&usd), false},
		{"walletb ECv2 no merchant", wallet.Payment{Wallet: wallet.WalletB, Version: "ECv2"}, req(&usd), false},
		{"walletb ECv1", wallet.Payment{Wallet: wallet.WalletB, Version: "ECv1"}, req(&usd), true},
	}
	for _, tc := range cases {
		err := walletMatchesOrder(&tc.p, tc.r, "mer_1")
		if (err == nil) != tc.ok || (err != nil && err.Messages["payment_source"] == nil) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
