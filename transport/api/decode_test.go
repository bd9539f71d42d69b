package api

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/transport/apierr"
)

func TestDecodeValidCharge(t *testing.T) {
	var r ChargeRequest
	if err := Decode([]byte(ValidChargeJSONForTest), &r); err != nil {
		t.Fatalf("Decode: %v", err.Messages)
	}
	if err := ValidateCharge(&r, testNow); err != nil {
		t.Fatalf("ValidateCharge: %s %v", err.Code.Code, err.Messages)
	}
	if *r.OrderID != "order-1" || *r.Amount != 1020 || *r.Customer.IPAddress != "2001:db8::1" ||
		*r.PaymentSource.CardNumber != "5555555555554444" || *r.ThreeDS.MPIData.ECI != "05" ||
		*r.Settle.DelayHours != 24 || len(r.OrderMetadata) != 3 || string(r.OrderMetadata["items"]) != "[1, 2]" {
		t.Fatalf("decoded values wrong: %+v", r)
	}
}

func TestDecodeBadBody(t *testing.T) {
	cases := []struct {
		name, body, msg string
	}{
		{"empty", ``, "body is empty"},
		{"whitespace", " \n\t\r ", "body is empty"},
		{"array", `[{"order_id":"1"}]`, "body must be a JSON object"},
		{"string", `"hello"`, "body must be a JSON object"},
		{"number", `42`, "body must be a JSON object"},
		{"null", `null`, "body must be a JSON object"},
		{"true", `true`, "body must be a JSON object"},
		{"byte order mark", "\xef\xbb\xbf{}", "body must be a JSON object"},
		{"form encoded", `order_id=1&amount=2`, "body must be a JSON object"},
		{"truncated", `{"order_id":"1"`, "ends too early"},
		{"truncated value", `{"order_id":`, "ends too early"},
		{"malformed", `{"order_id":"1",}`, "not valid JSON"},
		{"single quotes", `{'order_id':'1'}`, "not valid JSON"},
		{"trailing data", `{"order_id":"1"} {"x":1}`, "single JSON object"},
		{"trailing garbage", `{"order_id":"1"}x`, "single JSON object"},
		{"duplicate key", `{"amount":1,"amount":2}`, `body has a duplicate key "amount"`},
		{"duplicate nested key", `{"customer":{"email":"a@b.co","email":"c@d.co"}}`, `duplicate key "customer.email"`},
		{"duplicate in unknown member", `{"extra":{"x":1,"x":2}}`, `duplicate key "extra.x"`},
		{"duplicate in metadata", `{"order_metadata":{"a":1,"a":1}}`, `duplicate key "order_metadata.a"`},
		{"invalid UTF-8", "{\"order_id\":\"\xff\xfe\"}", "not valid UTF-8"},
		{"invalid UTF-8 in unknown key", "{\"\xc3\":1}", "not valid UTF-8"},
		{"lone surrogate", `{"order_id":"\ud800"}`, "invalid \\u escape"},
		{"type error then duplicate", `{"amount":"abc","x":1,"x":2}`, `duplicate key "x"`},
		{"type error then truncated", `{"amount":"abc","x":`, "ends too early"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r ChargeRequest
			err := Decode([]byte(tc.body), &r)
			expectOne(t, err, apierr.BadBody, "body", tc.msg)
			if err.Code.HTTP != 400 || err.Code.Code != "2.07" {
				t.Errorf("want 400 2.07, got %d %s", err.Code.HTTP, err.Code.Code)
			}
		})
	}
}

func TestDecodeWrongType(t *testing.T) {
	cases := []struct {
		name, body, attr, msg string
	}{
		{"amount string", `{"amount":"abc"}`, "amount", "amount should be an integer"},
		{"amount numeric string", `{"amount":"1020"}`, "amount", "amount should be an integer"},
		{"amount fraction", `{"amount":10.5}`, "amount", "amount should be an integer"},
		{"amount exponent", `{"amount":1e3}`, "amount", "amount should be an integer"},
		{"amount out of range", `{"amount":99999999999999999999}`, "amount", "amount is out of range"},
		{"amount bool", `{"amount":true}`, "amount", "amount should be an integer"},
		{"amount object", `{"amount":{}}`, "amount", "amount should be an integer"},
		{"order_id number", `{"order_id":12}`, "order_id", "order_id should be a string"},
		{"customer string", `{"customer":"jane"}`, "customer", "customer should be an object"},
		{"customer array", `{"customer":[]}`, "customer", "customer should be an object"},
		{"customer.email number", `{"customer":{"email":5}}`, "customer.email", "customer.email should be a string"},
		{"card_number number", `{"payment_source":{"card_number":4111111111111111}}`, "payment_source.card_number", "payment_source.card_number should be a string"},
		{"delay_hours string", `{"settle":{"delay_hours":"24"}}`, "settle.delay_hours", "settle.delay_hours should be an integer"},
		{"force string", `{"three_ds":{"force":"yes"}}`, "three_ds.force", "three_ds.force should be a boolean"},
		{"mpi_data string", `{"three_ds":{"mpi_data":"x"}}`, "three_ds.mpi_data", "three_ds.mpi_data should be an object"},
		{"order_metadata array", `{"order_metadata":[1]}`, "order_metadata", "order_metadata should be an object"},
		{"header.transactionId number", `{"payment_source":{"header":{"transactionId":1}}}`, "payment_source.header.transactionId", "should be a string"},
		{"recurring.retry_attempt fraction", `{"recurring":{"retry_attempt":1.5}}`, "recurring.retry_attempt", "should be an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r ChargeRequest
			err := Decode([]byte(tc.body), &r)
			expectOne(t, err, apierr.Invalid, tc.attr, tc.msg)
			if err.Code.HTTP != 422 {
				t.Errorf("want 422, got %d", err.Code.HTTP)
			}
		})
	}
}

func TestDecodeUnknownFieldsIgnored(t *testing.T) {
	body := strings.Replace(ValidChargeJSONForTest, `"order_id": "order-1",`,
		`"order_id": "order-1", "future_field": {"deep": [1, {"x": null}]}, "Amount": "not read",`, 1)
	body = strings.Replace(body, `"card_cvv": "123",`, `"card_cvv": "123", "card_nickname": 7,`, 1)
	var r ChargeRequest
	if err := Decode([]byte(body), &r); err != nil {
		t.Fatalf("Decode: %v", err.Messages)
	}
	if *r.Amount != 1020 {
		t.Fatalf("case-insensitive match: amount = %d", *r.Amount)
	}
	if err := ValidateCharge(&r, testNow); err != nil {
		t.Fatalf("ValidateCharge: %v", err.Messages)
	}
	// Settle ignores the charge-only fields.
	var s SettleRequest
	if err := Decode([]byte(ValidChargeJSONForTest), &s); err != nil {
		t.Fatalf("Decode settle: %v", err.Messages)
	}
	if err := ValidateSettle(&s); err != nil {
		t.Fatalf("ValidateSettle: %v", err.Messages)
	}
}

func TestDecodeNullIsAbsent(t *testing.T) {
	body := `{"order_id":"o1","amount":null,"currency":"USD","order_description":"d","order_date":null,
		"callback_url":null,"settle":{"delay_hours":0},"processing_mid":"m","three_ds":null,"recurring":{"type":null},
		"order_metadata":null,"customer":{"user_id":"u","email":"a@b.co","ip_address":"10.0.0.1","delivery_address":null},
		"payment_source":{"type":"token","payment_token":"t","card_cvv":null}}`
	var r ChargeRequest
	if err := Decode([]byte(body), &r); err != nil {
		t.Fatalf("Decode: %v", err.Messages)
	}
	if r.Amount != nil || r.OrderDate != nil || r.CallbackURL != nil || r.ThreeDS != nil || r.Recurring.Type != nil ||
		r.OrderMetadata != nil || r.Customer.DeliveryAddress != nil || r.PaymentSource.CardCVV != nil {
		t.Fatalf("null did not decode as absent: %+v", r)
	}
	err := ValidateCharge(&r, testNow)
	expectOne(t, err, apierr.Invalid, "amount", "amount is required")
}

func TestDecodeNoHalfResults(t *testing.T) {
	r := ValidChargeForTest()
	before := *r
	for _, body := range []string{`{"order_id":"changed","amount":"abc"}`, `{"order_id":"changed","x":1,"x":2}`, `{"order_id":"changed"`} {
		if err := Decode([]byte(body), r); err == nil {
			t.Fatalf("%s: want an error", body)
		}
		if !reflect.DeepEqual(*r, before) {
			t.Fatalf("%s: destination changed on failure", body)
		}
	}
	// Success replaces, it does not merge.
	if err := Decode([]byte(`{"order_id":"new"}`), r); err != nil {
		t.Fatal(err)
	}
	if *r.OrderID != "new" || r.Amount != nil || r.PaymentSource != nil {
		t.Fatalf("decode merged into the old value: %+v", r)
	}
}

func TestDecodeProgrammingErrors(t *testing.T) {
	var r ChargeRequest
	for _, v := range []any{nil, r, (*ChargeRequest)(nil)} {
		if err := Decode([]byte(`{}`), v); err == nil || err.Code != apierr.Internal {
			t.Errorf("Decode into %T: want 5.03, got %v", v, err)
		}
	}
}

func TestDecodeOtherRequests(t *testing.T) {
	var w WalletRequest
	body := `{"order_id":"o","amount":1,"currency":"EUR","order_description":"d","settle":{"delay_hours":1},
		"processing_mid":"m","customer":{"user_id":"u","email":"a@b.co","ip_address":"10.0.0.1"},
		"payment_source":{"type":"walletb-pay","signature":"s","signedMessage":"{\"a\":1}"}}`
	if err := Decode([]byte(body), &w); err != nil {
		t.Fatal(err.Messages)
	}
	if err := ValidateWallet(&w, "walletb-pay"); err != nil {
		t.Fatal(err.Messages)
	}
	ecv2 := strings.Replace(body, `"signature":"s"`, `"signature":"s","protocolVersion":"ECv2",
		"intermediateSigningKey":{"signedKey":"{\"keyValue\":\"MFkw\"}","signatures":["MEUC"]}`, 1)
	if err := Decode([]byte(ecv2), &w); err != nil {
		t.Fatal(err.Messages)
	}
	if err := ValidateWallet(&w, "walletb-pay"); err != nil || w.PaymentSource.IntermediateSigningKey == nil ||
		*w.PaymentSource.IntermediateSigningKey.SignedKey != `{"keyValue":"MFkw"}` {
		t.Fatalf("ECv2 with intermediateSigningKey: %v %+v", err, w.PaymentSource.IntermediateSigningKey)
	}
	badISK := strings.Replace(ecv2, `"signatures":["MEUC"]`, `"signatures":"MEUC"`, 1)
	if err := Decode([]byte(badISK), &w); err == nil || err.Messages["payment_source.intermediateSigningKey.signatures"] == nil {
		t.Fatalf("want payment_source.intermediateSigningKey.signatures type error, got %v", err)
	}
	var rf RefundRequest
	if err := Decode([]byte(`{"order_id":"o","amount":5,"refund_reason_code":"0042"}`), &rf); err != nil {
		t.Fatal(err.Messages)
	}
	if err := ValidateRefund(&rf); err != nil {
		t.Fatal(err.Messages)
	}
	var ip InitPaymentRequest
	if err := Decode([]byte(`{"payment_form":{"language":7}}`), &ip); err == nil || err.Messages["payment_form.language"] == nil {
		t.Fatalf("want payment_form.language type error, got %v", err)
	}
}

// A large (1 MiB) body decodes to its one error; how long that takes is
// BenchmarkDecodeLargeBody's to say.
func TestDecodeLargeBody(t *testing.T) {
	var r ChargeRequest
	if err := Decode(largeBody(), &r); err == nil || len(err.Messages["amount"]) == 0 || len(err.Messages) != 1 {
		t.Fatalf("want only amount's type error, got %v", err)
	}
}

func BenchmarkDecodeLargeBody(b *testing.B) {
	body := largeBody()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var r ChargeRequest
		if err := Decode(body, &r); err == nil {
			b.Fatal("want a type error")
		}
	}
}

func largeBody() []byte {
	return []byte(`{"order_metadata":{"k":"` + strings.Repeat("a", 1<<20) + `"},"amount":"x"}`)
}

func FuzzDecodeCharge(f *testing.F) {
	f.Add([]byte(ValidChargeJSONForTest))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"amount":1,"amount":2}`))
	f.Add([]byte(`{"amount":"abc"}`))
	f.Add([]byte("{\"order_id\":\"\xff\"}"))
	f.Add([]byte(`{"payment_source":{"type":"card","card_number":"378282246310005","card_exp_month":"1","card_exp_year":"99","card_cvv":"1234"}}`))
	f.Add([]byte(`{"three_ds":{"mpi_data":{"version":"2","cavv":"","eci":"","xid":null}},"payment_source":{"type":"card","card_number":"2"}}`))
	f.Add([]byte(`{"payment_source":{"type":"token"},"customer":{"email":"@","ip_address":"::","date_of_birth":"0000-00-00"}}`))
	f.Add([]byte(`{"order_metadata":{"a":{"b":[{"c":{}}]}},"callback_url":"http://[::1]:0/"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r ChargeRequest
		err := Decode(body, &r)
		if err != nil {
			if err.Code != apierr.BadBody && err.Code != apierr.Invalid {
				t.Fatalf("unexpected decode code %v", err.Code)
			}
			if len(err.Messages) != 1 {
				t.Fatalf("decode error with %d attributes", len(err.Messages))
			}
			if !reflect.DeepEqual(r, ChargeRequest{}) {
				t.Fatal("half result after a decode error")
			}
			return
		}
		if verr := ValidateCharge(&r, testNow); verr != nil {
			if verr.Code.HTTP != 422 || len(verr.Messages) == 0 {
				t.Fatalf("bad validation error %v", verr)
			}
		}
		// The other operations must not panic on the same body either.
		var w WalletRequest
		if Decode(body, &w) == nil {
			ValidateWallet(&w, "walleta-pay")
			ValidateWallet(&w, "walletb-pay")
		}
		var ip InitPaymentRequest
		if Decode(body, &ip) == nil {
			ValidateInitPayment(&ip)
		}
		var rf RefundRequest
		if Decode(body, &rf) == nil {
			ValidateRefund(&rf)
		}
	})
}

func BenchmarkDecodeValidateCharge(b *testing.B) {
	body := []byte(ValidChargeJSONForTest)
	b.ReportAllocs()
	for b.Loop() {
		var r ChargeRequest
		if err := Decode(body, &r); err != nil {
			b.Fatal(err)
		}
		if err := ValidateCharge(&r, testNow); err != nil {
			b.Fatal(err)
		}
	}
}

// Parse lists every violation at once: members of the wrong type, each
// reported once, with the validator's messages for the other members, and
// none of the validator's messages about a member already reported.
func TestParseListsEveryViolation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	validate := func(r *ChargeRequest) *apierr.Error { return ValidateCharge(r, now) }
	cases := []struct {
		name string
		edit func(m map[string]any)
		want map[string]string // attribute → a message it must have
	}{
		{"one type error, two missing fields", func(m map[string]any) {
			m["amount"] = "100"
			delete(m, "customer")
			delete(m, "processing_mid")
		}, map[string]string{"amount": "amount should be an integer", "customer": "customer is required", "processing_mid": "processing_mid is required"}},
		{"two type errors and a bad currency", func(m map[string]any) {
			m["amount"] = 10.5
			m["customer"] = "jane"
			m["currency"] = "ABCD"
		}, map[string]string{"amount": "amount should be an integer", "customer": "customer should be an object", "currency": "currency should have exactly 3 characters"}},
		{"a nested type error beside a nested constraint", func(m map[string]any) {
			m["customer"].(map[string]any)["email"] = 5
			m["payment_source"].(map[string]any)["card_number"] = "4111111111111112"
		}, map[string]string{"customer.email": "customer.email should be a string", "payment_source.card_number": "card_number"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal([]byte(ValidChargeJSONForTest), &m); err != nil {
				t.Fatal(err)
			}
			tc.edit(m)
			body, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			req, aerr := Parse(body, validate)
			if req != nil || aerr == nil || aerr.Code != apierr.Invalid {
				t.Fatalf("want 422 2.01, got %v %v", req, aerr)
			}
			if len(aerr.Messages) != len(tc.want) {
				t.Fatalf("attributes %v, want those of %v", aerr.Attributes(), tc.want)
			}
			for attr, msg := range tc.want {
				msgs := aerr.Messages[attr]
				if len(msgs) != 1 || !strings.Contains(msgs[0], msg) {
					t.Errorf("%s: %q, want one message with %q", attr, msgs, msg)
				}
			}
		})
	}
	// Syntax still wins, and a valid body parses.
	if _, aerr := Parse([]byte(`{"amount":"1", "amount":2}`), validate); aerr == nil || aerr.Code != apierr.BadBody {
		t.Fatalf("duplicate key: %v", aerr)
	}
	if req, aerr := Parse([]byte(ValidChargeJSONForTest), validate); aerr != nil || req == nil || *req.Amount == 0 {
		t.Fatalf("valid charge: %v %v", req, aerr)
	}
}

// Past maxTypeErrors members of the wrong type, the answer is those listed,
// without the validator's view of a request that still holds wrong types.
func TestParseBoundsTheTypeErrors(t *testing.T) {
	body := manyTypeErrors("")
	_, aerr := Parse(body, func(r *ChargeRequest) *apierr.Error { return ValidateCharge(r, time.Now()) })
	if aerr == nil || aerr.Code != apierr.Invalid || len(aerr.Messages) != maxTypeErrors {
		t.Fatalf("want %d type errors, got %v", maxTypeErrors, aerr)
	}
	for attr, msgs := range aerr.Messages {
		if len(msgs) != 1 || !strings.HasPrefix(msgs[0], attr+" should be") {
			t.Errorf("%s: %q is not a type error", attr, msgs)
		}
	}
}

// A large body lists fewer members of the wrong type: each costs a decode
// of the whole body, and the bytes decoded in all are bounded.
func TestParseBoundsTheWorkOfTypeErrors(t *testing.T) {
	pad := strings.Repeat("x", 700<<10)
	body := manyTypeErrors(pad)
	_, aerr := Parse(body, func(r *ChargeRequest) *apierr.Error { return ValidateCharge(r, time.Now()) })
	want := typeErrorDecodeBytes / len(body) // decodes that fit, each listing one member
	if aerr == nil || aerr.Code != apierr.Invalid || len(aerr.Messages) != want {
		t.Fatalf("a %d KB body: want %d type errors, got %v", len(body)>>10, want, aerr)
	}
}

// manyTypeErrors is a charge body with more members of the wrong type than
// maxTypeErrors, and an unknown member holding pad.
func manyTypeErrors(pad string) []byte {
	var b strings.Builder
	b.WriteString(`{"order_metadata":{},"pad":"` + pad + `"`)
	fields := []string{"order_id", "currency", "order_description", "order_items", "callback_url", "fail_url",
		"success_url", "website", "processing_mid", "dynamic_descriptor", "order_date", "subscription_product_id"}
	for _, f := range fields {
		b.WriteString(`,"` + f + `":1`)
	}
	b.WriteString(`,"customer":{"email":1,"user_id":1,"ip_address":1,"phone":1,"first_name":1,"last_name":1}`)
	b.WriteString(`,"payment_source":{"type":1,"card_number":1,"card_cvv":1,"card_exp_month":1,"card_exp_year":1,"card_holder_name":1,"billing_address":{"line1":1,"line2":1,"city":1,"state":1,"zip":1,"country":1}}`)
	b.WriteString(`,"settle":{"delay_hours":"x"},"amount":"x","three_ds":{"force":1,"attempt_non_secure":1},"recurring":"x"}`)
	return []byte(b.String())
}

// A list element of the wrong type is decoded as null: the validator's
// complaint about the list that holds it ("must not contain an empty
// signature") is about that null, and the answer leaves it out.
func TestParseLeavesOutWhatAWrongTypeCaused(t *testing.T) {
	body := `{"order_id":"o","amount":1,"currency":"EUR","order_description":"d","settle":{"delay_hours":1},
		"processing_mid":"m","customer":{"user_id":"u","email":"a@b.co","ip_address":"10.0.0.1"},
		"payment_source":{"type":"walletb-pay","signature":"s","signedMessage":"{\"a\":1}","protocolVersion":"ECv2",
		"intermediateSigningKey":{"signedKey":"k","signatures":["a",5]}}}`
	_, aerr := Parse([]byte(body), func(w *WalletRequest) *apierr.Error { return ValidateWallet(w, "walletb-pay") })
	if aerr == nil || aerr.Code != apierr.Invalid {
		t.Fatalf("want 422 2.01, got %v", aerr)
	}
	want := "payment_source.intermediateSigningKey.signatures.1"
	if len(aerr.Messages) != 1 || len(aerr.Messages[want]) != 1 {
		t.Fatalf("messages %v, want one, for %s", aerr.Messages, want)
	}
}

// The server hands Parse fasthttp's own request buffer, which fasthttp
// reuses once the request is answered, and sends what Parse returns to an
// order actor that may outlive the request: nothing decoded may point into
// the body.
func TestParseKeepsNothingOfTheBody(t *testing.T) {
	body := []byte(ValidChargeJSONForTest)
	r, err := Parse(body, func(r *ChargeRequest) *apierr.Error { return ValidateCharge(r, testNow) })
	if err != nil {
		t.Fatalf("Parse: %v", err.Messages)
	}
	before, merr := json.Marshal(r, json.Deterministic(true))
	if merr != nil {
		t.Fatal(merr)
	}
	for i := range body {
		body[i] = 'x'
	}
	after, _ := json.Marshal(r, json.Deterministic(true))
	if string(before) != string(after) {
		t.Fatalf("the decoded request changed with the body:\n%s\n%s", before, after)
	}
}
