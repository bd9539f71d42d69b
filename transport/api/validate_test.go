package api

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/apierr"
)

type chargeCase struct {
	name   string
	mutate func(r *ChargeRequest)
	code   apierr.Code // zero Code: the request must be valid
	attr   string
	msg    string
}

var (
	ok422      = apierr.Code{}
	invalid    = apierr.Invalid
	currencyC  = apierr.CurrencyInvalid
	cvvC       = apierr.CVVInvalid
	cardNumC   = apierr.CardNumberInvalid
	expiryC    = apierr.ExpiryInvalid
	long       = func(n int) *string { return ptr(strings.Repeat("x", n)) }
	longRune   = func(n int) *string { return ptr(strings.Repeat("é", n)) }
	metadataOf = func(n int) map[string]jsontext.Value {
		m := map[string]jsontext.Value{}
		for i := 0; i < n; i++ {
			m["k"+strconv.Itoa(i)] = jsontext.Value(`"v"`)
		}
		return m
	}
)

func cardOf(r *ChargeRequest) *PaymentSource { return r.PaymentSource }

func mpi(r *ChargeRequest) *MPIData {
	if r.ThreeDS == nil {
		r.ThreeDS = &ThreeDS{}
	}
	if r.ThreeDS.MPIData == nil {
		r.ThreeDS.MPIData = &MPIData{CAVV: ptr("AAABBEg0VhI0VniQEjRWAAAAAAA="), ECI: ptr("05"), Version: ptr("2.2.0")}
	}
	return r.ThreeDS.MPIData
}

var chargeCases = []chargeCase{
	// Valid variations.
	{name: "minimal valid card charge", mutate: func(r *ChargeRequest) {}},
	{name: "order_id of 255 characters", mutate: func(r *ChargeRequest) { r.OrderID = long(255) }},
	{name: "order_id of 255 multibyte characters", mutate: func(r *ChargeRequest) { r.OrderID = longRune(255) }},
	{name: "amount at the maximum", mutate: func(r *ChargeRequest) { r.Amount = ptr(MaxAmount) }},
	{name: "amount 1", mutate: func(r *ChargeRequest) { r.Amount = ptr(int64(1)) }},
	{name: "zero-decimal currency", mutate: func(r *ChargeRequest) { r.Currency = ptr("JPY") }},
	{name: "settle.delay_hours 0", mutate: func(r *ChargeRequest) { r.Settle.DelayHours = ptr(int64(0)) }},
	{name: "settle.delay_hours at the maximum", mutate: func(r *ChargeRequest) { r.Settle.DelayHours = ptr(MaxSettleDelayHours) }},
	{name: "order_metadata of 10", mutate: func(r *ChargeRequest) { r.OrderMetadata = metadataOf(10) }},
	{name: "IPv6 customer", mutate: func(r *ChargeRequest) { r.Customer.IPAddress = ptr("2001:db8::1") }},
	{name: "IPv4-mapped IPv6", mutate: func(r *ChargeRequest) { r.Customer.IPAddress = ptr("::ffff:192.0.2.1") }},
	{name: "email with plus and subdomain", mutate: func(r *ChargeRequest) { r.Customer.Email = ptr("a.b+c@mail.example.co.uk") }},
	{name: "leap day of birth", mutate: func(r *ChargeRequest) { r.Customer.DateOfBirth = ptr("2000-02-29") }},
	{name: "ip_country alpha-3", mutate: func(r *ChargeRequest) { r.Customer.IPCountry = ptr("DEU") }},
	{name: "recurring.type null", mutate: func(r *ChargeRequest) { r.Recurring = &Recurring{} }},
	{name: "each recurring.type", mutate: func(r *ChargeRequest) { r.Recurring = &Recurring{Type: ptr("installment")} }},
	{name: "exp month without leading zero", mutate: func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("7") }},
	{name: "exp year of 2 digits", mutate: func(r *ChargeRequest) { cardOf(r).CardExpYear = ptr("30") }},
	{name: "expires this month", mutate: func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("05"); cardOf(r).CardExpYear = ptr("2026") }},
	{name: "no cvv", mutate: func(r *ChargeRequest) { cardOf(r).CardCVV = nil }},
	{name: "amex with 4-digit cvv", mutate: func(r *ChargeRequest) {
		cardOf(r).CardNumber = ptr("378282246310005")
		cardOf(r).CardCVV = ptr("1234")
	}},
	{name: "19-digit card", mutate: func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("6200000000000000000") }},
	{name: "12-digit card", mutate: func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("500000000009") }},
	{name: "token charge", mutate: func(r *ChargeRequest) { *r = *ValidTokenChargeForTest() }},
	{name: "token charge with cvv", mutate: func(r *ChargeRequest) { *r = *ValidTokenChargeForTest(); cardOf(r).CardCVV = ptr("1234") }},
	{name: "every optional field", mutate: func(r *ChargeRequest) { *r = *FullChargeForTest() }},
	{name: "mpi 2.x visa without xid", mutate: func(r *ChargeRequest) { mpi(r).XID = nil }},
	{name: "mpi 2.x token without xid", mutate: func(r *ChargeRequest) {
		*r = *ValidTokenChargeForTest()
		mpi(r).XID = nil
	}},
	{name: "mpi 1.x with xid", mutate: func(r *ChargeRequest) { mpi(r).Version = ptr("1.0.2"); mpi(r).XID = ptr("eGlk") }},
	{name: "mpi default version with xid", mutate: func(r *ChargeRequest) { mpi(r).Version = nil; mpi(r).XID = ptr("eGlk") }},
	{name: "mpi unpadded base64 cavv", mutate: func(r *ChargeRequest) { mpi(r).CAVV = ptr("AAABBEg0VhI0VniQEjRWAAAAAAA") }},
	{name: "3ds flags without mpi", mutate: func(r *ChargeRequest) { r.ThreeDS = &ThreeDS{Force: ptr(true)} }},
	{name: "uppercase url scheme", mutate: func(r *ChargeRequest) { r.CallbackURL = ptr("HTTPS://merchant.example/cb") }},
	{name: "url with credentials and port", mutate: func(r *ChargeRequest) { r.CallbackURL = ptr("https://u:p@merchant.example:8443/cb") }},

	// order_id
	{"order_id missing", func(r *ChargeRequest) { r.OrderID = nil }, invalid, "order_id", "order_id is required"},
	{"order_id empty", func(r *ChargeRequest) { r.OrderID = ptr("") }, invalid, "order_id", "order_id must not be empty"},
	{"order_id blank", func(r *ChargeRequest) { r.OrderID = ptr("   ") }, invalid, "order_id", "must not be empty"},
	{"order_id too long", func(r *ChargeRequest) { r.OrderID = long(256) }, invalid, "order_id", "order_id should have at most 255 characters"},
	{"order_id multibyte too long", func(r *ChargeRequest) { r.OrderID = longRune(256) }, invalid, "order_id", "at most 255"},
	{"order_id control", func(r *ChargeRequest) { r.OrderID = ptr("a\nb") }, invalid, "order_id", "control characters"},
	// amount
	{"amount missing", func(r *ChargeRequest) { r.Amount = nil }, invalid, "amount", "amount is required"},
	{"amount zero", func(r *ChargeRequest) { r.Amount = ptr(int64(0)) }, invalid, "amount", "amount should be greater than 0"},
	{"amount negative", func(r *ChargeRequest) { r.Amount = ptr(int64(-5)) }, invalid, "amount", "greater than 0"},
	{"amount too large", func(r *ChargeRequest) { r.Amount = ptr(MaxAmount + 1) }, invalid, "amount", "at most 1000000000000000"},
	// currency
	{"currency missing", func(r *ChargeRequest) { r.Currency = nil }, invalid, "currency", "currency is required"},
	{"currency 4 chars", func(r *ChargeRequest) { r.Currency = ptr("ABCD") }, currencyC, "currency", "currency should have exactly 3 characters"},
	{"currency 2 chars", func(r *ChargeRequest) { r.Currency = ptr("US") }, currencyC, "currency", "exactly 3 characters"},
	{"currency empty", func(r *ChargeRequest) { r.Currency = ptr("") }, currencyC, "currency", "exactly 3 characters"},
	{"currency unknown", func(r *ChargeRequest) { r.Currency = ptr("XYZ") }, currencyC, "currency", "not an ISO-4217"},
	{"currency withdrawn", func(r *ChargeRequest) { r.Currency = ptr("HRK") }, currencyC, "currency", "not an ISO-4217"},
	{"currency no minor unit", func(r *ChargeRequest) { r.Currency = ptr("XAU") }, currencyC, "currency", "not an ISO-4217"},
	{"currency lower case", func(r *ChargeRequest) { r.Currency = ptr("usd") }, currencyC, "currency", "upper-case"},
	{"currency multibyte", func(r *ChargeRequest) { r.Currency = ptr("ÜSD") }, currencyC, "currency", "not an ISO-4217"},
	// order_description
	{"order_description missing", func(r *ChargeRequest) { r.OrderDescription = nil }, invalid, "order_description", "order_description is required"},
	{"order_description empty", func(r *ChargeRequest) { r.OrderDescription = ptr("") }, invalid, "order_description", "must not be empty"},
	{"order_description too long", func(r *ChargeRequest) { r.OrderDescription = long(256) }, invalid, "order_description", "order_description should have at most 255 characters"},
	// order_date
	{"order_date too long", func(r *ChargeRequest) { r.OrderDate = long(51) }, invalid, "order_date", "at most 50"},
	{"order_date ISO T", func(r *ChargeRequest) { r.OrderDate = ptr("2026-05-15T10:30:00") }, invalid, "order_date", "yyyy-MM-dd HH:mm:ss"},
	{"order_date impossible", func(r *ChargeRequest) { r.OrderDate = ptr("2026-02-30 10:30:00") }, invalid, "order_date", "format"},
	{"order_date one-digit hour", func(r *ChargeRequest) { r.OrderDate = ptr("2026-05-15 1:30:00") }, invalid, "order_date", "format"},
	{"order_date fraction", func(r *ChargeRequest) { r.OrderDate = ptr("2026-05-15 10:30:00.5") }, invalid, "order_date", "format"},
	{"order_date hour 24", func(r *ChargeRequest) { r.OrderDate = ptr("2026-05-15 24:00:00") }, invalid, "order_date", "format"},
	// order_items, order_number
	{"order_items too long", func(r *ChargeRequest) { r.OrderItems = long(256) }, invalid, "order_items", "order_items should have at most 255 characters"},
	{"order_number negative", func(r *ChargeRequest) { r.OrderNumber = ptr(int64(-1)) }, invalid, "order_number", "0 or greater"},
	// subscription_product_id
	{"subscription_product_id 35", func(r *ChargeRequest) { r.SubscriptionProductID = long(35) }, invalid, "subscription_product_id", "exactly 36 characters"},
	{"subscription_product_id 37", func(r *ChargeRequest) { r.SubscriptionProductID = long(37) }, invalid, "subscription_product_id", "exactly 36 characters"},
	{"subscription_product_id not uuid", func(r *ChargeRequest) { r.SubscriptionProductID = long(36) }, invalid, "subscription_product_id", "UUID"},
	{"subscription_product_id bad hyphens", func(r *ChargeRequest) {
		r.SubscriptionProductID = ptr("3f2504e04-f89-41d3-9a0c-0305e82c3301")
	}, invalid, "subscription_product_id", "UUID"},
	// URLs
	{"callback_url ftp", func(r *ChargeRequest) { r.CallbackURL = ptr("ftp://merchant.example/cb") }, invalid, "callback_url", "callback_url should be an absolute http or https URL"},
	{"callback_url relative", func(r *ChargeRequest) { r.CallbackURL = ptr("/cb") }, invalid, "callback_url", "absolute"},
	{"callback_url no host", func(r *ChargeRequest) { r.CallbackURL = ptr("https://") }, invalid, "callback_url", "absolute"},
	{"callback_url opaque", func(r *ChargeRequest) { r.CallbackURL = ptr("https:merchant.example") }, invalid, "callback_url", "absolute"},
	{"callback_url space", func(r *ChargeRequest) { r.CallbackURL = ptr("https://merchant.example/a b") }, invalid, "callback_url", "absolute"},
	{"callback_url bad port", func(r *ChargeRequest) { r.CallbackURL = ptr("https://merchant.example:99999/") }, invalid, "callback_url", "absolute"},
	{"callback_url empty", func(r *ChargeRequest) { r.CallbackURL = ptr("") }, invalid, "callback_url", "absolute"},
	{"callback_url too long", func(r *ChargeRequest) {
		r.CallbackURL = ptr("https://merchant.example/" + strings.Repeat("a", 232))
	}, invalid, "callback_url", "callback_url should have at most 255 characters"},
	{"fail_url invalid", func(r *ChargeRequest) { r.FailURL = ptr("merchant.example/fail") }, invalid, "fail_url", "fail_url should be an absolute"},
	{"success_url invalid", func(r *ChargeRequest) { r.SuccessURL = ptr("javascript:alert(1)") }, invalid, "success_url", "success_url should be an absolute"},
	{"success_url too long", func(r *ChargeRequest) { r.SuccessURL = long(256) }, invalid, "success_url", "at most 255"},
	// settle
	{"settle missing", func(r *ChargeRequest) { r.Settle = nil }, invalid, "settle", "settle is required"},
	{"settle.delay_hours missing", func(r *ChargeRequest) { r.Settle = &Settle{} }, invalid, "settle.delay_hours", "settle.delay_hours is required"},
	{"settle.delay_hours negative", func(r *ChargeRequest) { r.Settle.DelayHours = ptr(int64(-1)) }, invalid, "settle.delay_hours", "0 or greater"},
	{"settle.delay_hours too large", func(r *ChargeRequest) { r.Settle.DelayHours = ptr(MaxSettleDelayHours + 1) }, invalid, "settle.delay_hours", "at most 8760"},
	// website, processing_mid, dynamic_descriptor, order_metadata
	{"website too long", func(r *ChargeRequest) { r.Website = long(256) }, invalid, "website", "website should have at most 255 characters"},
	{"website without a scheme", func(r *ChargeRequest) { r.Website = ptr("shop.example") }, invalid, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example"},
	{"website of another scheme", func(r *ChargeRequest) { r.Website = ptr("javascript:alert(1)") }, invalid, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example"},
	{"website without a host", func(r *ChargeRequest) { r.Website = ptr("https:///cart") }, invalid, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example"},
	{"website with a wildcard", func(r *ChargeRequest) { r.Website = ptr("https://*.example") }, invalid, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example"},
	{"website with user info", func(r *ChargeRequest) { r.Website = ptr("https://user@shop.example") }, invalid, "website", "website should be an absolute http or https URL with a host, e.g. https://shop.example"},
	{"processing_mid missing", func(r *ChargeRequest) { r.ProcessingMID = nil }, invalid, "processing_mid", "processing_mid is required"},
	{"processing_mid empty", func(r *ChargeRequest) { r.ProcessingMID = ptr("") }, invalid, "processing_mid", "must not be empty"},
	{"processing_mid too long", func(r *ChargeRequest) { r.ProcessingMID = long(256) }, invalid, "processing_mid", "at most 255"},
	{"dynamic_descriptor too long", func(r *ChargeRequest) { r.DynamicDescriptor = long(51) }, invalid, "dynamic_descriptor", "dynamic_descriptor should have at most 50 characters"},
	{"order_metadata 11", func(r *ChargeRequest) { r.OrderMetadata = metadataOf(11) }, invalid, "order_metadata", "order_metadata should have at most 10 properties"},
	// customer
	{"customer missing", func(r *ChargeRequest) { r.Customer = nil }, invalid, "customer", "customer is required"},
	{"customer.user_id missing", func(r *ChargeRequest) { r.Customer.UserID = nil }, invalid, "customer.user_id", "customer.user_id is required"},
	{"customer.user_id too long", func(r *ChargeRequest) { r.Customer.UserID = long(101) }, invalid, "customer.user_id", "at most 100"},
	{"customer.email missing", func(r *ChargeRequest) { r.Customer.Email = nil }, invalid, "customer.email", "customer.email is required"},
	{"customer.email too long", func(r *ChargeRequest) {
		r.Customer.Email = ptr(strings.Repeat("a", 90) + "@example.com")
	}, invalid, "customer.email", "customer.email should have at most 100 characters"},
	{"customer.email no at", func(r *ChargeRequest) { r.Customer.Email = ptr("jane.example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email two ats", func(r *ChargeRequest) { r.Customer.Email = ptr("a@b@example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email no dot domain", func(r *ChargeRequest) { r.Customer.Email = ptr("jane@localhost") }, invalid, "customer.email", "e-mail address"},
	{"customer.email space", func(r *ChargeRequest) { r.Customer.Email = ptr("jane doe@example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email empty local", func(r *ChargeRequest) { r.Customer.Email = ptr("@example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email double dot", func(r *ChargeRequest) { r.Customer.Email = ptr("jane..doe@example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email bad label", func(r *ChargeRequest) { r.Customer.Email = ptr("jane@-example.com") }, invalid, "customer.email", "e-mail address"},
	{"customer.email display name", func(r *ChargeRequest) { r.Customer.Email = ptr("Jane <jane@example.com>") }, invalid, "customer.email", "e-mail address"},
	{"customer.ip_address missing", func(r *ChargeRequest) { r.Customer.IPAddress = nil }, invalid, "customer.ip_address", "customer.ip_address is required"},
	{"customer.ip_address bad", func(r *ChargeRequest) { r.Customer.IPAddress = ptr("999.1.1.1") }, invalid, "customer.ip_address", "IPv4 or IPv6"},
	{"customer.ip_address leading zeros", func(r *ChargeRequest) { r.Customer.IPAddress = ptr("010.0.0.1") }, invalid, "customer.ip_address", "IPv4 or IPv6"},
	{"customer.ip_address zone", func(r *ChargeRequest) { r.Customer.IPAddress = ptr("fe80::1%eth0") }, invalid, "customer.ip_address", "IPv4 or IPv6"},
	{"customer.ip_address hostname", func(r *ChargeRequest) { r.Customer.IPAddress = ptr("localhost") }, invalid, "customer.ip_address", "IPv4 or IPv6"},
	{"customer.ip_address too long", func(r *ChargeRequest) { r.Customer.IPAddress = long(51) }, invalid, "customer.ip_address", "at most 50"},
	{"customer.first_name too long", func(r *ChargeRequest) { r.Customer.FirstName = long(101) }, invalid, "customer.first_name", "at most 100"},
	{"customer.last_name too long", func(r *ChargeRequest) { r.Customer.LastName = long(101) }, invalid, "customer.last_name", "at most 100"},
	{"customer.phone_number too long", func(r *ChargeRequest) { r.Customer.PhoneNumber = long(51) }, invalid, "customer.phone_number", "at most 50"},
	{"customer.date_of_birth impossible", func(r *ChargeRequest) { r.Customer.DateOfBirth = ptr("1990-02-30") }, invalid, "customer.date_of_birth", "YYYY-MM-DD"},
	{"customer.date_of_birth not leap", func(r *ChargeRequest) { r.Customer.DateOfBirth = ptr("1900-02-29") }, invalid, "customer.date_of_birth", "YYYY-MM-DD"},
	{"customer.date_of_birth short parts", func(r *ChargeRequest) { r.Customer.DateOfBirth = ptr("1990-2-3") }, invalid, "customer.date_of_birth", "YYYY-MM-DD"},
	{"customer.date_of_birth other order", func(r *ChargeRequest) { r.Customer.DateOfBirth = ptr("28/02/1990") }, invalid, "customer.date_of_birth", "YYYY-MM-DD"},
	{"customer.date_of_birth too long", func(r *ChargeRequest) { r.Customer.DateOfBirth = long(51) }, invalid, "customer.date_of_birth", "at most 50"},
	{"customer.ip_country lower", func(r *ChargeRequest) { r.Customer.IPCountry = ptr("us") }, invalid, "customer.ip_country", "country code"},
	{"customer.ip_country one letter", func(r *ChargeRequest) { r.Customer.IPCountry = ptr("U") }, invalid, "customer.ip_country", "country code"},
	{"customer.ip_country four letters", func(r *ChargeRequest) { r.Customer.IPCountry = ptr("USAA") }, invalid, "customer.ip_country", "country code"},
	{"customer.ip_country digits", func(r *ChargeRequest) { r.Customer.IPCountry = ptr("840") }, invalid, "customer.ip_country", "country code"},
	// delivery address (2.6)
	{"delivery line1", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{Line1: long(101)} }, invalid, "customer.delivery_address.line1", "at most 100"},
	{"delivery line2", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{Line2: long(101)} }, invalid, "customer.delivery_address.line2", "at most 100"},
	{"delivery city", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{City: long(101)} }, invalid, "customer.delivery_address.city", "at most 100"},
	{"delivery state", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{State: long(101)} }, invalid, "customer.delivery_address.state", "at most 100"},
	{"delivery zip", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{Zip: long(11)} }, invalid, "customer.delivery_address.zip", "at most 10"},
	{"delivery country", func(r *ChargeRequest) { r.Customer.DeliveryAddress = &Address{Country: ptr("Germany")} }, invalid, "customer.delivery_address.country", "country code"},
	{"billing zip", func(r *ChargeRequest) { cardOf(r).BillingAddress = &Address{Zip: long(11)} }, invalid, "payment_source.billing_address.zip", "at most 10"},
	{"billing country", func(r *ChargeRequest) { cardOf(r).BillingAddress = &Address{Country: ptr("de")} }, invalid, "payment_source.billing_address.country", "country code"},
	// recurring
	{"recurring.type unknown", func(r *ChargeRequest) { r.Recurring = &Recurring{Type: ptr("weekly")} }, invalid, "recurring.type", "one of 1-click, recurring, installment, retry"},
	{"recurring.retry_attempt negative", func(r *ChargeRequest) { r.Recurring = &Recurring{RetryAttempt: ptr(int64(-1))} }, invalid, "recurring.retry_attempt", "0 or greater"},
	// three_ds.mpi_data
	{"mpi cavv missing", func(r *ChargeRequest) { mpi(r).CAVV = nil }, invalid, "three_ds.mpi_data.cavv", "three_ds.mpi_data.cavv is required"},
	{"mpi cavv too long", func(r *ChargeRequest) { mpi(r).CAVV = ptr(strings.Repeat("A", 52)) }, invalid, "three_ds.mpi_data.cavv", "at most 50"},
	{"mpi cavv not base64", func(r *ChargeRequest) { mpi(r).CAVV = ptr("not base64!") }, invalid, "three_ds.mpi_data.cavv", "base64"},
	{"mpi eci missing", func(r *ChargeRequest) { mpi(r).ECI = nil }, invalid, "three_ds.mpi_data.eci", "three_ds.mpi_data.eci is required"},
	{"mpi eci too long", func(r *ChargeRequest) { mpi(r).ECI = ptr("005") }, invalid, "three_ds.mpi_data.eci", "at most 2"},
	{"mpi eci letters", func(r *ChargeRequest) { mpi(r).ECI = ptr("ab") }, invalid, "three_ds.mpi_data.eci", "digits"},
	{"mpi version too long", func(r *ChargeRequest) { mpi(r).Version = ptr("2.2.0.0.0.0") }, invalid, "three_ds.mpi_data.version", "at most 10"},
	{"mpi version unknown major", func(r *ChargeRequest) { mpi(r).Version = ptr("3.0.0") }, invalid, "three_ds.mpi_data.version", "3-D Secure version"},
	{"mpi version garbage", func(r *ChargeRequest) { mpi(r).Version = ptr("v2") }, invalid, "three_ds.mpi_data.version", "3-D Secure version"},
	{"mpi xid missing with 1.x", func(r *ChargeRequest) { mpi(r).Version = ptr("1.0.2"); mpi(r).XID = nil }, invalid, "three_ds.mpi_data.xid", "xid is required with 3-D Secure version 1.x.x"},
	{"mpi xid missing with default version", func(r *ChargeRequest) { mpi(r).Version = nil; mpi(r).XID = nil }, invalid, "three_ds.mpi_data.xid", "1.x.x"},
	{"mpi xid missing with 2.x mastercard", func(r *ChargeRequest) {
		cardOf(r).CardNumber = ptr("5555555555554444")
		mpi(r).XID = nil
	}, invalid, "three_ds.mpi_data.xid", "Mastercard"},
	{"mpi xid missing with 2.x mastercard 2-series", func(r *ChargeRequest) {
		cardOf(r).CardNumber = ptr("2223003122003222")
		mpi(r).XID = nil
	}, invalid, "three_ds.mpi_data.xid", "Mastercard"},
	{"mpi xid empty with 1.x", func(r *ChargeRequest) { mpi(r).Version = ptr("1.0.2"); mpi(r).XID = ptr("") }, invalid, "three_ds.mpi_data.xid", "required"},
	{"mpi xid too long", func(r *ChargeRequest) { mpi(r).XID = long(51) }, invalid, "three_ds.mpi_data.xid", "at most 50"},
	{"mpi ds_transaction_id too long", func(r *ChargeRequest) { mpi(r).DSTransactionID = long(51) }, invalid, "three_ds.mpi_data.ds_transaction_id", "at most 50"},
	// payment_source
	{"payment_source missing", func(r *ChargeRequest) { r.PaymentSource = nil }, invalid, "payment_source", "payment_source is required"},
	{"payment_source.type missing", func(r *ChargeRequest) { cardOf(r).Type = nil }, invalid, "payment_source.type", "payment_source.type is required"},
	{"payment_source.type unknown", func(r *ChargeRequest) { cardOf(r).Type = ptr("paypal") }, invalid, "payment_source.type", "card or token"},
	{"payment_source.type wallet on charge", func(r *ChargeRequest) { cardOf(r).Type = ptr("walleta-pay") }, invalid, "payment_source.type", "walleta-pay endpoint"},
	{"payment_source.type case", func(r *ChargeRequest) { cardOf(r).Type = ptr("Card") }, invalid, "payment_source.type", "card or token"},
	// card number (2.08)
	{"card_number missing", func(r *ChargeRequest) { cardOf(r).CardNumber = nil }, invalid, "payment_source.card_number", "payment_source.card_number is required"},
	{"card_number empty", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("") }, invalid, "payment_source.card_number", "must not be empty"},
	{"card_number letters", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("4111abcd11111111") }, cardNumC, "payment_source.card_number", "digits only"},
	{"card_number spaces", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("4111 1111 1111 1111") }, cardNumC, "payment_source.card_number", "digits only"},
	{"card_number 11 digits", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("41111111116") }, cardNumC, "payment_source.card_number", "12 to 19 digits"},
	{"card_number 20 digits", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("41111111111111111113") }, cardNumC, "payment_source.card_number", "12 to 19 digits"},
	{"card_number luhn", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("4111111111111112") }, cardNumC, "payment_source.card_number", "Luhn"},
	{"card_number all zeros", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("0000000000000000") }, cardNumC, "payment_source.card_number", "not a valid card number"},
	// holder
	{"card_holder_name missing", func(r *ChargeRequest) { cardOf(r).CardHolderName = nil }, invalid, "payment_source.card_holder_name", "payment_source.card_holder_name is required"},
	{"card_holder_name too long", func(r *ChargeRequest) { cardOf(r).CardHolderName = long(33) }, invalid, "payment_source.card_holder_name", "at most 32"},
	// expiry (2.09)
	{"card_exp_month missing", func(r *ChargeRequest) { cardOf(r).CardExpMonth = nil }, invalid, "payment_source.card_exp_month", "payment_source.card_exp_month is required"},
	{"card_exp_month 13", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("13") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_month 00", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("00") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_month 0", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("0") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_month 012", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("012") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_month letters", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("ja") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_month empty", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("") }, expiryC, "payment_source.card_exp_month", "01 to 12"},
	{"card_exp_year missing", func(r *ChargeRequest) { cardOf(r).CardExpYear = nil }, invalid, "payment_source.card_exp_year", "payment_source.card_exp_year is required"},
	{"card_exp_year 3 digits", func(r *ChargeRequest) { cardOf(r).CardExpYear = ptr("203") }, expiryC, "payment_source.card_exp_year", "4 digits"},
	{"card_exp_year 5 digits", func(r *ChargeRequest) { cardOf(r).CardExpYear = ptr("20300") }, expiryC, "payment_source.card_exp_year", "4 digits"},
	{"card_exp_year letters", func(r *ChargeRequest) { cardOf(r).CardExpYear = ptr("20x0") }, expiryC, "payment_source.card_exp_year", "4 digits"},
	{"card expired last month", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("04"); cardOf(r).CardExpYear = ptr("2026") }, expiryC, "payment_source.card_exp_year", "expired at the end of 04/2026"},
	{"card expired 2-digit year", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("1"); cardOf(r).CardExpYear = ptr("25") }, expiryC, "payment_source.card_exp_year", "01/2025"},
	{"card expired year 0035", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("12"); cardOf(r).CardExpYear = ptr("0035") }, expiryC, "payment_source.card_exp_year", "12/0035"},
	// cvv (2.06)
	{"cvv 2 digits", func(r *ChargeRequest) { cardOf(r).CardCVV = ptr("12") }, cvvC, "payment_source.card_cvv", "exactly 3 digits"},
	{"cvv 4 digits on visa", func(r *ChargeRequest) { cardOf(r).CardCVV = ptr("1234") }, cvvC, "payment_source.card_cvv", "exactly 3 digits"},
	{"cvv letters", func(r *ChargeRequest) { cardOf(r).CardCVV = ptr("12a") }, cvvC, "payment_source.card_cvv", "exactly 3 digits"},
	{"cvv empty", func(r *ChargeRequest) { cardOf(r).CardCVV = ptr("") }, cvvC, "payment_source.card_cvv", "exactly 3 digits"},
	{"cvv 3 digits on amex", func(r *ChargeRequest) {
		cardOf(r).CardNumber = ptr("378282246310005")
		cardOf(r).CardCVV = ptr("123")
	}, cvvC, "payment_source.card_cvv", "exactly 4 digits"},
	{"cvv 3 digits on amex 34", func(r *ChargeRequest) {
		cardOf(r).CardNumber = ptr("341111111111111")
		cardOf(r).CardCVV = ptr("123")
	}, cvvC, "payment_source.card_cvv", "exactly 4 digits"},
	{"cvv 5 digits on token", func(r *ChargeRequest) {
		*r = *ValidTokenChargeForTest()
		cardOf(r).CardCVV = ptr("12345")
	}, cvvC, "payment_source.card_cvv", "3 or 4 digits"},
	// token
	{"payment_token missing", func(r *ChargeRequest) { *r = *ValidTokenChargeForTest(); cardOf(r).PaymentToken = nil }, invalid, "payment_source.payment_token", "payment_source.payment_token is required"},
	{"payment_token empty", func(r *ChargeRequest) { *r = *ValidTokenChargeForTest(); cardOf(r).PaymentToken = ptr("") }, invalid, "payment_source.payment_token", "must not be empty"},
	{"payment_token too long", func(r *ChargeRequest) { *r = *ValidTokenChargeForTest(); cardOf(r).PaymentToken = long(256) }, invalid, "payment_source.payment_token", "at most 255"},
}

func TestValidateCharge(t *testing.T) {
	for _, tc := range chargeCases {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidChargeForTest()
			tc.mutate(r)
			err := ValidateCharge(r, testNow)
			if tc.code == ok422 {
				if err != nil {
					t.Fatalf("want valid, got %s %v", err.Code.Code, err.Messages)
				}
				return
			}
			expectOne(t, err, tc.code, tc.attr, tc.msg)
			if err.Code.HTTP != 422 {
				t.Errorf("HTTP: want 422, got %d", err.Code.HTTP)
			}
		})
	}
}

func TestValidateChargeExactMessages(t *testing.T) {
	r := ValidChargeForTest()
	r.Currency = ptr("ABCD")
	err := ValidateCharge(r, testNow)
	if err == nil || err.Code != apierr.CurrencyInvalid {
		t.Fatalf("want 2.03, got %v", err)
	}
	if got := err.Messages["currency"]; len(got) != 1 || got[0] != "currency should have exactly 3 characters" {
		t.Fatalf("currency messages: %q", got)
	}
	r = ValidChargeForTest()
	r.Customer.Email = nil
	err = ValidateCharge(r, testNow)
	if got := err.Messages["customer.email"]; len(got) != 1 || got[0] != "customer.email is required" {
		t.Fatalf("email messages: %q", got)
	}
	r = ValidChargeForTest()
	r.OrderDescription = long(256)
	err = ValidateCharge(r, testNow)
	if got := err.Messages["order_description"]; len(got) != 1 || got[0] != "order_description should have at most 255 characters" {
		t.Fatalf("order_description messages: %q", got)
	}
}

func TestValidateChargeListsEveryViolation(t *testing.T) {
	r := ValidChargeForTest()
	r.OrderID = nil
	r.Amount = ptr(int64(0))
	r.Currency = ptr("ABCD")
	r.OrderDescription = long(300)
	r.OrderDate = ptr("yesterday")
	r.CallbackURL = ptr("not a url")
	r.Settle = &Settle{DelayHours: ptr(int64(-3))}
	r.ProcessingMID = nil
	r.OrderMetadata = metadataOf(12)
	r.Customer = &Customer{Email: ptr("nope"), IPAddress: ptr("1.2.3"), IPCountry: ptr("usa")}
	r.Recurring = &Recurring{Type: ptr("sometimes"), RetryAttempt: ptr(int64(-1))}
	r.ThreeDS = &ThreeDS{MPIData: &MPIData{Version: ptr("1.0.2")}}
	r.PaymentSource = &PaymentSource{Type: ptr("card"), CardNumber: ptr("4111111111111112"),
		CardExpMonth: ptr("13"), CardExpYear: ptr("1"), CardCVV: ptr("1")}

	err := ValidateCharge(r, testNow)
	if err == nil {
		t.Fatal("want an error")
	}
	if err.Code != apierr.Invalid {
		t.Errorf("mixed families: want 2.01, got %s", err.Code.Code)
	}
	want := []string{
		"order_id", "amount", "currency", "order_description", "order_date", "callback_url",
		"settle.delay_hours", "processing_mid", "order_metadata",
		"customer.user_id", "customer.email", "customer.ip_address", "customer.ip_country",
		"recurring.type", "recurring.retry_attempt",
		"three_ds.mpi_data.cavv", "three_ds.mpi_data.eci", "three_ds.mpi_data.xid",
		"payment_source.card_number", "payment_source.card_holder_name", "payment_source.card_exp_month",
		"payment_source.card_exp_year", "payment_source.card_cvv",
	}
	for _, a := range want {
		if len(err.Messages[a]) == 0 {
			t.Errorf("missing attribute %q", a)
		}
	}
	if len(err.Messages) != len(want) {
		t.Errorf("want %d attributes, got %d: %v", len(want), len(err.Messages), err.Attributes())
	}
}

func TestCodeSelection(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *ChargeRequest)
		code   apierr.Code
	}{
		{"two expiry problems stay 2.09", func(r *ChargeRequest) { cardOf(r).CardExpMonth = ptr("13"); cardOf(r).CardExpYear = ptr("x") }, apierr.ExpiryInvalid},
		{"card number and cvv mix to 2.01", func(r *ChargeRequest) { cardOf(r).CardNumber = ptr("4111111111111112"); cardOf(r).CardCVV = ptr("1") }, apierr.Invalid},
		{"currency and amount mix to 2.01", func(r *ChargeRequest) { r.Currency = ptr("XYZ"); r.Amount = ptr(int64(0)) }, apierr.Invalid},
		{"expired and bad cvv mix to 2.01", func(r *ChargeRequest) { cardOf(r).CardExpYear = ptr("2020"); cardOf(r).CardCVV = ptr("1") }, apierr.Invalid},
		{"required card field is 2.01", func(r *ChargeRequest) { cardOf(r).CardExpMonth = nil; cardOf(r).CardExpYear = ptr("2020x") }, apierr.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidChargeForTest()
			tc.mutate(r)
			err := ValidateCharge(r, testNow)
			if err == nil || err.Code != tc.code {
				t.Fatalf("want %s, got %v", tc.code.Code, err)
			}
		})
	}
}

func TestValidateInitPayment(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *InitPaymentRequest)
		code   apierr.Code
		attr   string
		msg    string
	}{
		{name: "valid", mutate: func(r *InitPaymentRequest) {}},
		{name: "no payment_form", mutate: func(r *InitPaymentRequest) { r.PaymentForm = nil }},
		{name: "payment_form without language", mutate: func(r *InitPaymentRequest) { r.PaymentForm = &PaymentForm{} }},
		{name: "upper-case language", mutate: func(r *InitPaymentRequest) { r.PaymentForm.Language = ptr("DE") }},
		{name: "mpi_data is not read", mutate: func(r *InitPaymentRequest) { r.ThreeDS = &ThreeDS{Force: ptr(true), MPIData: &MPIData{}} }},
		{name: "redirect urls", mutate: func(r *InitPaymentRequest) {
			r.FailURL = ptr("https://m.example/f")
			r.SuccessURL = ptr("https://m.example/s")
		}},
		{"language 3 letters", func(r *InitPaymentRequest) { r.PaymentForm.Language = ptr("eng") }, invalid, "payment_form.language", "2-letter"},
		{"language digit", func(r *InitPaymentRequest) { r.PaymentForm.Language = ptr("e1") }, invalid, "payment_form.language", "2-letter"},
		{"language empty", func(r *InitPaymentRequest) { r.PaymentForm.Language = ptr("") }, invalid, "payment_form.language", "2-letter"},
		{"shared: customer missing", func(r *InitPaymentRequest) { r.Customer = nil }, invalid, "customer", "customer is required"},
		{"shared: currency", func(r *InitPaymentRequest) { r.Currency = ptr("EURO") }, currencyC, "currency", "exactly 3 characters"},
		{"shared: settle", func(r *InitPaymentRequest) { r.Settle = nil }, invalid, "settle", "required"},
		{"shared: success_url", func(r *InitPaymentRequest) { r.SuccessURL = ptr("nope") }, invalid, "success_url", "absolute"},
		{"shared: order_metadata", func(r *InitPaymentRequest) { r.OrderMetadata = metadataOf(11) }, invalid, "order_metadata", "at most 10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidInitPaymentForTest()
			tc.mutate(r)
			err := ValidateInitPayment(r)
			if tc.code == ok422 {
				if err != nil {
					t.Fatalf("want valid, got %v", err.Messages)
				}
				return
			}
			expectOne(t, err, tc.code, tc.attr, tc.msg)
		})
	}
}

func TestValidateWallet(t *testing.T) {
	cases := []struct {
		name   string
		wallet string
		mutate func(r *WalletRequest)
		code   apierr.Code
		attr   string
		msg    string
	}{
		{name: "walleta EC_v1 valid", wallet: "walleta-pay", mutate: func(r *WalletRequest) {}},
		{name: "walleta RSA_v1 valid", wallet: "walleta-pay", mutate: func(r *WalletRequest) {
			r.PaymentSource.Version = ptr("RSA_v1")
			r.PaymentSource.Header.EphemeralPublicKey = nil
			r.PaymentSource.Header.WrappedKey = ptr("d2ZrZXk=")
		}},
		{name: "walleta optional fields", wallet: "walleta-pay", mutate: func(r *WalletRequest) {
			r.PaymentSource.Header.ApplicationData = ptr("abc")
			r.PaymentSource.Network = ptr("Visa")
		}},
		{name: "walleta redirects are not read", wallet: "walleta-pay", mutate: func(r *WalletRequest) {
			r.FailURL = ptr("nope")
			r.SuccessURL = ptr("nope")
		}},
		{"walleta type missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Type = nil }, invalid, "payment_source.type", "payment_source.type is required"},
		{"walleta type mismatch", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Type = ptr("walletb-pay") }, invalid, "payment_source.type", "should be walleta-pay"},
		{"walleta type card", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Type = ptr("card") }, invalid, "payment_source.type", "should be walleta-pay"},
		{"walleta payment_source missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource = nil }, invalid, "payment_source", "payment_source is required"},
		{"walleta signature missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Signature = nil }, invalid, "payment_source.signature", "payment_source.signature is required"},
		{"walleta version missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Version = nil }, invalid, "payment_source.version", "payment_source.version is required"},
		{"walleta version unknown", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Version = ptr("EC_v2") }, invalid, "payment_source.version", "EC_v1 or RSA_v1"},
		{"walleta data missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Data = nil }, invalid, "payment_source.data", "payment_source.data is required"},
		{"walleta data empty", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Data = ptr("") }, invalid, "payment_source.data", "must not be empty"},
		{"walleta header missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Header = nil }, invalid, "payment_source.header", "payment_source.header is required"},
		{"walleta transactionId missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Header.TransactionID = nil }, invalid, "payment_source.header.transactionId", "payment_source.header.transactionId is required"},
		{"walleta publicKeyHash missing", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Header.PublicKeyHash = nil }, invalid, "payment_source.header.publicKeyHash", "payment_source.header.publicKeyHash is required"},
		{"walleta EC_v1 without ephemeralPublicKey", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Header.EphemeralPublicKey = nil }, invalid, "payment_source.header.ephemeralPublicKey", "required when payment_source.version is EC_v1"},
		{"walleta RSA_v1 without wrappedKey", "walleta-pay", func(r *WalletRequest) { r.PaymentSource.Version = ptr("RSA_v1") }, invalid, "payment_source.header.wrappedKey", "required when payment_source.version is RSA_v1"},
		{"walleta shared fields", "walleta-pay", func(r *WalletRequest) { r.CallbackURL = ptr("ftp://x") }, invalid, "callback_url", "absolute"},

		{name: "walletb valid", wallet: "walletb-pay", mutate: func(r *WalletRequest) {}},
		{name: "walletb without protocolVersion", wallet: "walletb-pay", mutate: func(r *WalletRequest) { r.PaymentSource.ProtocolVersion = nil }},
		{name: "walletb ECv0", wallet: "walletb-pay", mutate: func(r *WalletRequest) { r.PaymentSource.ProtocolVersion = ptr("ECv0") }},
		{"walletb type mismatch", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.Type = ptr("walleta-pay") }, invalid, "payment_source.type", "should be walletb-pay"},
		{"walletb signature missing", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.Signature = nil }, invalid, "payment_source.signature", "payment_source.signature is required"},
		{"walletb signedMessage missing", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.SignedMessage = nil }, invalid, "payment_source.signedMessage", "payment_source.signedMessage is required"},
		{"walletb protocolVersion unknown", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.ProtocolVersion = ptr("ECv3") }, invalid, "payment_source.protocolVersion", "ECv0, ECv1 or ECv2"},
		{"walletb shared fields", "walletb-pay", func(r *WalletRequest) { r.Customer.Email = nil }, invalid, "customer.email", "required"},
		{name: "walletb ECv1 without intermediateSigningKey", wallet: "walletb-pay", mutate: func(r *WalletRequest) {
			r.PaymentSource.ProtocolVersion = ptr("ECv1")
			r.PaymentSource.IntermediateSigningKey = nil
		}},
		{"walletb ECv2 without intermediateSigningKey", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.IntermediateSigningKey = nil }, invalid, "payment_source.intermediateSigningKey", "required when payment_source.protocolVersion is ECv2"},
		{"walletb signedKey missing", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.IntermediateSigningKey.SignedKey = nil }, invalid, "payment_source.intermediateSigningKey.signedKey", "payment_source.intermediateSigningKey.signedKey is required"},
		{"walletb signatures missing", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.IntermediateSigningKey.Signatures = nil }, invalid, "payment_source.intermediateSigningKey.signatures", "at least one signature"},
		{"walletb signature empty", "walletb-pay", func(r *WalletRequest) { r.PaymentSource.IntermediateSigningKey.Signatures = []string{"MEUC", " "} }, invalid, "payment_source.intermediateSigningKey.signatures", "empty signature"},
		{name: "walleta ignores intermediateSigningKey", wallet: "walleta-pay", mutate: func(r *WalletRequest) {
			r.PaymentSource.IntermediateSigningKey = &IntermediateSigningKey{}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ValidWalletAForTest()
			if tc.wallet == "walletb-pay" {
				r = ValidWalletBForTest()
			}
			tc.mutate(r)
			err := ValidateWallet(r, tc.wallet)
			if tc.code == ok422 {
				if err != nil {
					t.Fatalf("want valid, got %v", err.Messages)
				}
				return
			}
			expectOne(t, err, tc.code, tc.attr, tc.msg)
		})
	}
	if err := ValidateWallet(ValidWalletAForTest(), "card"); err == nil || err.Code != apierr.Internal {
		t.Errorf("unknown wallet endpoint: want 5.03, got %v", err)
	}
	if got := WalletBProtocolVersion(&PaymentSource{}); got != "ECv0" {
		t.Errorf("WalletBProtocolVersion default: %q", got)
	}
	if got := WalletBProtocolVersion(ValidWalletBForTest().PaymentSource); got != "ECv2" {
		t.Errorf("WalletBProtocolVersion: %q", got)
	}
}

func TestValidateOrderOperations(t *testing.T) {
	type op struct {
		name string
		run  func() *apierr.Error
		code apierr.Code
		attr string
		msg  string
	}
	oid := ptr("order-1")
	amt := ptr(int64(500))
	cases := []op{
		{name: "settle valid", run: func() *apierr.Error { return ValidateSettle(&SettleRequest{OrderID: oid, Amount: amt}) }},
		{"settle order_id missing", func() *apierr.Error { return ValidateSettle(&SettleRequest{Amount: amt}) }, invalid, "order_id", "order_id is required"},
		{"settle order_id too long", func() *apierr.Error { return ValidateSettle(&SettleRequest{OrderID: long(256), Amount: amt}) }, invalid, "order_id", "at most 255"},
		{name: "settle without amount (the whole authorisation)", run: func() *apierr.Error { return ValidateSettle(&SettleRequest{OrderID: oid}) }},
		{"settle amount zero", func() *apierr.Error { return ValidateSettle(&SettleRequest{OrderID: oid, Amount: ptr(int64(0))}) }, invalid, "amount", "greater than 0"},
		{"settle amount too large", func() *apierr.Error {
			return ValidateSettle(&SettleRequest{OrderID: oid, Amount: ptr(MaxAmount + 1)})
		}, invalid, "amount", "at most"},

		{name: "void valid", run: func() *apierr.Error { return ValidateVoid(&VoidRequest{OrderID: oid}) }},
		{"void order_id missing", func() *apierr.Error { return ValidateVoid(&VoidRequest{}) }, invalid, "order_id", "order_id is required"},
		{"void order_id empty", func() *apierr.Error { return ValidateVoid(&VoidRequest{OrderID: ptr("")}) }, invalid, "order_id", "must not be empty"},
		{name: "void with an amount", run: func() *apierr.Error { return ValidateVoid(&VoidRequest{OrderID: oid, Amount: amt}) }},
		{"void amount zero", func() *apierr.Error { return ValidateVoid(&VoidRequest{OrderID: oid, Amount: ptr(int64(0))}) }, invalid, "amount", "greater than 0"},
		{"void amount too large", func() *apierr.Error {
			return ValidateVoid(&VoidRequest{OrderID: oid, Amount: ptr(MaxAmount + 1)})
		}, invalid, "amount", "at most"},

		{name: "refund valid", run: func() *apierr.Error { return ValidateRefund(&RefundRequest{OrderID: oid, Amount: amt}) }},
		{name: "refund with reason", run: func() *apierr.Error {
			return ValidateRefund(&RefundRequest{OrderID: oid, Amount: amt, RefundReasonCode: ptr("0001")})
		}},
		{"refund order_id missing", func() *apierr.Error { return ValidateRefund(&RefundRequest{Amount: amt}) }, invalid, "order_id", "order_id is required"},
		{"refund amount missing", func() *apierr.Error { return ValidateRefund(&RefundRequest{OrderID: oid}) }, invalid, "amount", "amount is required"},
		{"refund amount negative", func() *apierr.Error { return ValidateRefund(&RefundRequest{OrderID: oid, Amount: ptr(int64(-1))}) }, invalid, "amount", "greater than 0"},
		{"refund reason 3 digits", func() *apierr.Error {
			return ValidateRefund(&RefundRequest{OrderID: oid, Amount: amt, RefundReasonCode: ptr("123")})
		}, invalid, "refund_reason_code", "refund_reason_code should have exactly 4 digits"},
		{"refund reason 5 digits", func() *apierr.Error {
			return ValidateRefund(&RefundRequest{OrderID: oid, Amount: amt, RefundReasonCode: ptr("12345")})
		}, invalid, "refund_reason_code", "exactly 4 digits"},
		{"refund reason letters", func() *apierr.Error {
			return ValidateRefund(&RefundRequest{OrderID: oid, Amount: amt, RefundReasonCode: ptr("12a4")})
		}, invalid, "refund_reason_code", "exactly 4 digits"},

		{name: "status valid", run: func() *apierr.Error { return ValidateStatus(&StatusRequest{OrderID: oid}) }},
		{"status order_id missing", func() *apierr.Error { return ValidateStatus(&StatusRequest{}) }, invalid, "order_id", "order_id is required"},
		{"status order_id too long", func() *apierr.Error { return ValidateStatus(&StatusRequest{OrderID: long(256)}) }, invalid, "order_id", "at most 255"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if tc.code == ok422 {
				if err != nil {
					t.Fatalf("want valid, got %v", err.Messages)
				}
				return
			}
			expectOne(t, err, tc.code, tc.attr, tc.msg)
		})
	}
	// Both settle fields at once.
	err := ValidateSettle(&SettleRequest{Amount: ptr(int64(0))})
	if err == nil || len(err.Messages) != 2 {
		t.Fatalf("settle with nothing: want 2 attributes, got %v", err)
	}
}

// A token charge's card is known once the token resolves, and the order
// actor judges it then with order.CheckTokenCard: a card charge with that
// card number gets the same messages, from the same rules.
func TestTokenCardMessagesMatchCardCharge(t *testing.T) {
	const mastercard, amex = "5555555555554444", "378282246310005"
	r := ValidChargeForTest()
	r.PaymentSource.CardNumber = ptr(mastercard)
	r.ThreeDS = &ThreeDS{MPIData: &MPIData{CAVV: ptr("AAABBEg0VhI0VniQEjRWAAAAAAA="), ECI: ptr("02"), Version: ptr("2.1.0")}}
	cardErr := ValidateCharge(r, testNow)
	rej := order.CheckTokenCard(mastercard, "", &order.ThreeDS{Version: "2.1.0"})
	if cardErr == nil || rej == nil || cardErr.Messages["three_ds.mpi_data.xid"][0] != rej.Message {
		t.Fatalf("card charge %v, token charge %+v: want the same xid message", cardErr, rej)
	}
	r = ValidChargeForTest()
	r.PaymentSource.CardNumber, r.PaymentSource.CardCVV = ptr(amex), ptr("123")
	cardErr = ValidateCharge(r, testNow)
	rej = order.CheckTokenCard(amex, "123", nil)
	if cardErr == nil || cardErr.Code != apierr.CVVInvalid || rej == nil || rej.Kind != order.RejectCVV ||
		cardErr.Messages[rej.Attribute][0] != rej.Message {
		t.Fatalf("card charge %v, token charge %+v: want the same CVV message", cardErr, rej)
	}
}

// WithCallbackGuard merges the callback guard's refusal into the request's
// other violations: one answer, 2.01 for any mix.
func TestWithCallbackGuard(t *testing.T) {
	refuse := func(string) error {
		return errors.New("callback_url must not point to a private, loopback or link-local address")
	}
	allow := func(string) error { return nil }
	u := ptr("http://10.0.0.1/cb")
	withURL := &OrderFields{CallbackURL: u}

	if err := WithCallbackGuard(nil, withURL, allow); err != nil {
		t.Fatalf("allowed: %v", err)
	}
	if err := WithCallbackGuard(nil, &OrderFields{}, refuse); err != nil {
		t.Fatalf("no callback_url: %v", err)
	}
	expectOne(t, WithCallbackGuard(nil, withURL, refuse), invalid, "callback_url", "private")

	cvv := apierr.New(apierr.CVVInvalid, "payment_source.card_cvv", "payment_source.card_cvv should have exactly 3 digits")
	err := WithCallbackGuard(cvv, withURL, refuse)
	if err == nil || err.Code != apierr.Invalid || len(err.Messages) != 2 || len(err.Messages["callback_url"]) != 1 {
		t.Fatalf("with a CVV violation: want both in one 2.01, got %v", err)
	}
	// A callback_url the validator refused already is not judged again.
	bad := apierr.New(apierr.Invalid, "callback_url", "callback_url should be an absolute http or https URL")
	if err := WithCallbackGuard(bad, withURL, refuse); len(err.Messages["callback_url"]) != 1 {
		t.Fatalf("callback_url refused twice: %v", err.Messages)
	}
}

func TestNilRequests(t *testing.T) {
	for name, err := range map[string]*apierr.Error{
		"charge": ValidateCharge(nil, testNow), "init": ValidateInitPayment(nil),
		"wallet": ValidateWallet(nil, "walleta-pay"), "settle": ValidateSettle(nil),
		"void": ValidateVoid(nil), "refund": ValidateRefund(nil), "status": ValidateStatus(nil),
	} {
		if err == nil || err.Code != apierr.BadBody {
			t.Errorf("%s(nil): want 2.07, got %v", name, err)
		}
	}
}

func TestMPIVersion(t *testing.T) {
	if got := MPIVersion(nil); got != "1.0.0" {
		t.Errorf("nil: %q", got)
	}
	if got := MPIVersion(&MPIData{}); got != "1.0.0" {
		t.Errorf("absent: %q", got)
	}
	if got := MPIVersion(&MPIData{Version: ptr("2.1.0")}); got != "2.1.0" {
		t.Errorf("given: %q", got)
	}
}
