package walleta

import "testing"

// TestParsePayloadCurrency: the token's numeric currency code is named with
// the same table the API accepts orders with, so every accepted currency
// (XAD, the newest, included) can be paid with a token.
func TestParsePayloadCurrency(t *testing.T) {
	for numeric, alpha := range map[string]string{"840": "USD", "392": "JPY", "048": "BHD", "990": "CLF", "396": "XAD", "999": ""} {
		plain := `{"applicationPrimaryAccountNumber":"4111111111111111","applicationExpirationDate":"301231",` +
			`"currencyCode":"` + numeric + `","transactionAmount":1000,"paymentDataType":"3DSecure",` +
			`"paymentData":{"onlinePaymentCryptogram":"AAAAAAAAAAAAAAAAAAAAAAAAAAA="}}`
		p, err := parsePayload([]byte(plain))
		if err != nil {
			t.Fatalf("%s: %v", numeric, err)
		}
		if p.Currency != alpha || p.CurrencyNumeric != numeric {
			t.Errorf("currencyCode %s: Currency %q, CurrencyNumeric %q; want %q", numeric, p.Currency, p.CurrencyNumeric, alpha)
		}
	}
}
