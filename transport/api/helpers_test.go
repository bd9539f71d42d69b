package api

import (
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/paygate/gateway/transport/apierr"
)

// testNow is the clock of every validation test: cards expiring in 05/2026
// are still valid, 04/2026 has expired.
var testNow = time.Date(2026, 5, 15, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func validOrderFieldsForTest() OrderFields {
	return OrderFields{
		OrderID:          ptr("order-1"),
		Amount:           ptr(int64(1020)),
		Currency:         ptr("USD"),
		OrderDescription: ptr("Premium package"),
		Settle:           &Settle{DelayHours: ptr(int64(24))},
		ProcessingMID:    ptr("mid-1"),
		Customer: &Customer{
			UserID:    ptr("user-1"),
			Email:     ptr("jane.doe@example.com"),
			IPAddress: ptr("203.0.113.7"),
		},
	}
}

// ValidChargeForTest is a minimal valid card charge.
func ValidChargeForTest() *ChargeRequest {
	return &ChargeRequest{
		OrderFields: validOrderFieldsForTest(),
		PaymentSource: &PaymentSource{
			Type:           ptr("card"),
			CardNumber:     ptr("4111111111111111"),
			CardHolderName: ptr("JANE DOE"),
			CardExpMonth:   ptr("12"),
			CardExpYear:    ptr("2030"),
			CardCVV:        ptr("123"),
		},
	}
}

// FullChargeForTest is a valid card charge with every optional field set.
func FullChargeForTest() *ChargeRequest {
	r := ValidChargeForTest()
	r.OrderDate = ptr("2026-05-15 10:30:00")
	r.OrderItems = ptr("1x Premium package")
	r.OrderNumber = ptr(int64(3))
	r.SubscriptionProductID = ptr("3f2504e0-4f89-41d3-9a0c-0305e82c3301")
	r.CallbackURL = ptr("https://merchant.example/callback")
	r.FailURL = ptr("https://merchant.example/fail?x=1")
	r.SuccessURL = ptr("http://merchant.example:8080/ok#done")
	r.Website = ptr("https://merchant.example")
	r.DynamicDescriptor = ptr("MERCHANT*PREMIUM")
	r.OrderMetadata = map[string]jsontext.Value{"a": jsontext.Value(`1`), "b": jsontext.Value(`{"x":[1,2]}`)}
	r.Customer.FirstName = ptr("Jane")
	r.Customer.LastName = ptr("Doe")
	r.Customer.PhoneNumber = ptr("+1 555 0100")
	r.Customer.DateOfBirth = ptr("1990-02-28")
	r.Customer.IPCountry = ptr("US")
	r.Customer.DeliveryAddress = validAddressForTest()
	r.ThreeDS = &ThreeDS{Force: ptr(true), AttemptNonSecure: ptr(false), MPIData: &MPIData{
		CAVV:            ptr("AAABBEg0VhI0VniQEjRWAAAAAAA="),
		ECI:             ptr("05"),
		Version:         ptr("2.2.0"),
		XID:             ptr("MDAwMDAwMDAwMDAwMDAwMzIyNzY="),
		DSTransactionID: ptr("f25084f0-5b16-4c0a-ae5d-b24808a95e4b"),
	}}
	r.Recurring = &Recurring{Type: ptr("recurring"), RetryAttempt: ptr(int64(0))}
	r.PaymentSource.BillingAddress = validAddressForTest()
	return r
}

func validAddressForTest() *Address {
	return &Address{
		Line1: ptr("1 Main Street"), Line2: ptr("Apt 2"), City: ptr("Springfield"),
		State: ptr("IL"), Zip: ptr("62701"), Country: ptr("USA"),
	}
}

// ValidTokenChargeForTest is a minimal valid token charge.
func ValidTokenChargeForTest() *ChargeRequest {
	r := ValidChargeForTest()
	r.PaymentSource = &PaymentSource{Type: ptr("token"), PaymentToken: ptr("tok_0123456789abcdef")}
	return r
}

// ValidInitPaymentForTest is a minimal valid init-payment.
func ValidInitPaymentForTest() *InitPaymentRequest {
	return &InitPaymentRequest{OrderFields: validOrderFieldsForTest(), PaymentForm: &PaymentForm{Language: ptr("en")}}
}

// ValidWalletAForTest is a valid walleta-pay request (EC_v1).
func ValidWalletAForTest() *WalletRequest {
	return &WalletRequest{OrderFields: validOrderFieldsForTest(), PaymentSource: &PaymentSource{
		Type:      ptr("walleta-pay"),
		Signature: ptr("MIAGCSqGSIb3DQEHAqCAMIACAQExDzANBglghkgBZQMEAgEFADCABgkqhkiG9w0BBwEAAKCAMIID"),
		Version:   ptr("EC_v1"),
		Data:      ptr("3+f4oOTwPa6f1UZ6tG"),
		Header: &WalletAHeader{
			TransactionID:      ptr("c1caf5ae72f0039a82bad92b828363734f85bf2f9cadf193d1bad9ddcb60a795"),
			PublicKeyHash:      ptr("LbsUwAT6w1JV9tFXocU813TCHks+LSuFF0R/eBkrWnQ="),
			EphemeralPublicKey: ptr("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"),
		},
	}}
}

// ValidWalletBForTest is a valid walletb-pay request.
func ValidWalletBForTest() *WalletRequest {
	return &WalletRequest{OrderFields: validOrderFieldsForTest(), PaymentSource: &PaymentSource{
		Type:            ptr("walletb-pay"),
		Signature:       ptr("MEQCIH6Q4OwQ0jAceFEkGF0JID6sJNXxOEi4r+mA7biRxqBQAiAondqoUpU/bdsrAOpZIsrHQS9nwiiNwOrr24RyPeHA0Q=="),
		ProtocolVersion: ptr("ECv2"),
		SignedMessage:   ptr(`{"encryptedMessage":"ZW5jcnlwdGVk","ephemeralPublicKey":"BPhV","tag":"9ZbA"}`),
		IntermediateSigningKey: &IntermediateSigningKey{
			SignedKey:  ptr(`{"keyValue":"MFkw","keyExpiration":"1750000000000"}`),
			Signatures: []string{"MEUCIQ=="},
		},
	}}
}

// ValidChargeJSONForTest is the wire form of a complete valid charge.
const ValidChargeJSONForTest = `{
  "order_id": "order-1",
  "amount": 1020,
  "currency": "USD",
  "order_description": "Premium package",
  "order_date": "2026-05-15 10:30:00",
  "order_items": "1x Premium package",
  "order_number": 3,
  "subscription_product_id": "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
  "callback_url": "https://merchant.example/callback",
  "fail_url": "https://merchant.example/fail",
  "success_url": "https://merchant.example/success",
  "settle": {"delay_hours": 24},
  "website": "https://merchant.example",
  "processing_mid": "mid-1",
  "dynamic_descriptor": "MERCHANT*PREMIUM",
  "order_metadata": {"coupon": "SPRING", "items": [1, 2], "nested": {"a": null}},
  "three_ds": {"force": true, "attempt_non_secure": false,
    "mpi_data": {"cavv": "AAABBEg0VhI0VniQEjRWAAAAAAA=", "eci": "05", "version": "2.2.0",
      "xid": "MDAwMDAwMDAwMDAwMDAwMzIyNzY=", "ds_transaction_id": "f25084f0-5b16-4c0a-ae5d-b24808a95e4b"}},
  "recurring": {"type": "1-click", "retry_attempt": 0},
  "customer": {
    "user_id": "user-1", "email": "jane.doe@example.com", "ip_address": "2001:db8::1",
    "first_name": "Jane", "last_name": "Doe", "phone_number": "+1 555 0100",
    "date_of_birth": "1990-02-28", "ip_country": "US",
    "delivery_address": {"line1": "1 Main Street", "city": "Springfield", "zip": "62701", "country": "US"}
  },
  "payment_source": {
    "type": "card", "card_number": "5555555555554444", "card_holder_name": "JANE DOE",
    "card_exp_month": "12", "card_exp_year": "2030", "card_cvv": "123",
    "billing_address": {"line1": "1 Main Street", "country": "USA"}
  }
}`

// expectOne asserts err has the given code and exactly one attribute, attr;
// when msg is not empty, one of attr's messages must contain it.
func expectOne(t *testing.T, err *apierr.Error, code apierr.Code, attr, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s %q, got no error", code.Code, attr)
	}
	if err.Code != code {
		t.Errorf("code: want %s/%d, got %s/%d (%v)", code.Code, code.HTTP, err.Code.Code, err.Code.HTTP, err.Messages)
	}
	if len(err.Messages) != 1 || len(err.Messages[attr]) == 0 {
		t.Fatalf("attributes: want only %q, got %v", attr, err.Messages)
	}
	if msg != "" {
		found := false
		for _, m := range err.Messages[attr] {
			if strings.Contains(m, msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("messages of %q: want one containing %q, got %q", attr, msg, err.Messages[attr])
		}
	}
	for a, ms := range err.Messages {
		for _, m := range ms {
			if !strings.Contains(m, a) && a != "body" {
				t.Errorf("message %q does not name its attribute %q", m, a)
			}
		}
	}
}
