// Package currency is the gateway's one table of ISO-4217 currencies: each
// accepted alphabetic code with its numeric code and its minor-unit
// exponent. The API validates and formats amounts with it, and wallet
// tokens (which carry the numeric code) are matched against orders with it,
// so the two can never disagree about which currencies exist.
//
// It is a domain fact table beside the order state machine (order/card holds
// the card rules the same way): edges read it, it reads nothing.
package currency

// Currency is one ISO-4217 currency.
type Currency struct {
	Alpha   string // "USD"
	Numeric string // "840"
	// Exponent is the number of decimal places of the smallest unit
	// (USD 2: an amount of 1020 is 10.20; JPY 0; KWD 3; CLF 4).
	Exponent int
}

// table is ISO 4217 List One (current currencies and funds) as published on
// 2026-01-01. Entries whose minor unit is "N.A." are left out because they
// cannot carry an amount in a smallest unit: precious metals (XAU, XAG, XPD,
// XPT), bond-market and accounting units (XBA-XBD, XDR, XSU, XUA) and the
// testing and no-currency codes (XTS, XXX). Withdrawn codes (for example HRK,
// BGN, ANG, SLL, CUC, ZWL) are not accepted.
var table = []Currency{
	{"AED", "784", 2}, {"AFN", "971", 2}, {"ALL", "008", 2}, {"AMD", "051", 2},
	{"AOA", "973", 2}, {"ARS", "032", 2}, {"AUD", "036", 2}, {"AWG", "533", 2},
	{"AZN", "944", 2}, {"BAM", "977", 2}, {"BBD", "052", 2}, {"BDT", "050", 2},
	{"BHD", "048", 3}, {"BIF", "108", 0}, {"BMD", "060", 2}, {"BND", "096", 2},
	{"BOB", "068", 2}, {"BOV", "984", 2}, {"BRL", "986", 2}, {"BSD", "044", 2},
	{"BTN", "064", 2}, {"BWP", "072", 2}, {"BYN", "933", 2}, {"BZD", "084", 2},
	{"CAD", "124", 2}, {"CDF", "976", 2}, {"CHE", "947", 2}, {"CHF", "756", 2},
	{"CHW", "948", 2}, {"CLF", "990", 4}, {"CLP", "152", 0}, {"CNY", "156", 2},
	{"COP", "170", 2}, {"COU", "970", 2}, {"CRC", "188", 2}, {"CUP", "192", 2},
	{"CVE", "132", 2}, {"CZK", "203", 2}, {"DJF", "262", 0}, {"DKK", "208", 2},
	{"DOP", "214", 2}, {"DZD", "012", 2}, {"EGP", "818", 2}, {"ERN", "232", 2},
	{"ETB", "230", 2}, {"EUR", "978", 2}, {"FJD", "242", 2}, {"FKP", "238", 2},
	{"GBP", "826", 2}, {"GEL", "981", 2}, {"GHS", "936", 2}, {"GIP", "292", 2},
	{"GMD", "270", 2}, {"GNF", "324", 0}, {"GTQ", "320", 2}, {"GYD", "328", 2},
	{"HKD", "344", 2}, {"HNL", "340", 2}, {"HTG", "332", 2}, {"HUF", "348", 2},
	{"IDR", "360", 2}, {"ILS", "376", 2}, {"INR", "356", 2}, {"IQD", "368", 3},
	{"IRR", "364", 2}, {"ISK", "352", 0}, {"JMD", "388", 2}, {"JOD", "400", 3},
	{"JPY", "392", 0}, {"KES", "404", 2}, {"KGS", "417", 2}, {"KHR", "116", 2},
	{"KMF", "174", 0}, {"KPW", "408", 2}, {"KRW", "410", 0}, {"KWD", "414", 3},
	{"KYD", "136", 2}, {"KZT", "398", 2}, {"LAK", "418", 2}, {"LBP", "422", 2},
	{"LKR", "144", 2}, {"LRD", "430", 2}, {"LSL", "426", 2}, {"LYD", "434", 3},
	{"MAD", "504", 2}, {"MDL", "498", 2}, {"MGA", "969", 2}, {"MKD", "807", 2},
	{"MMK", "104", 2}, {"MNT", "496", 2}, {"MOP", "446", 2}, {"MRU", "929", 2},
	{"MUR", "480", 2}, {"MVR", "462", 2}, {"MWK", "454", 2}, {"MXN", "484", 2},
	{"MXV", "979", 2}, {"MYR", "458", 2}, {"MZN", "943", 2}, {"NAD", "516", 2},
	{"NGN", "566", 2}, {"NIO", "558", 2}, {"NOK", "578", 2}, {"NPR", "524", 2},
	{"NZD", "554", 2}, {"OMR", "512", 3}, {"PAB", "590", 2}, {"PEN", "604", 2},
	{"PGK", "598", 2}, {"PHP", "608", 2}, {"PKR", "586", 2}, {"PLN", "985", 2},
	{"PYG", "600", 0}, {"QAR", "634", 2}, {"RON", "946", 2}, {"RSD", "941", 2},
	{"RUB", "643", 2}, {"RWF", "646", 0}, {"SAR", "682", 2}, {"SBD", "090", 2},
	{"SCR", "690", 2}, {"SDG", "938", 2}, {"SEK", "752", 2}, {"SGD", "702", 2},
	{"SHP", "654", 2}, {"SLE", "925", 2}, {"SOS", "706", 2}, {"SRD", "968", 2},
	{"SSP", "728", 2}, {"STN", "930", 2}, {"SVC", "222", 2}, {"SYP", "760", 2},
	{"SZL", "748", 2}, {"THB", "764", 2}, {"TJS", "972", 2}, {"TMT", "934", 2},
	{"TND", "788", 3}, {"TOP", "776", 2}, {"TRY", "949", 2}, {"TTD", "780", 2},
	{"TWD", "901", 2}, {"TZS", "834", 2}, {"UAH", "980", 2}, {"UGX", "800", 0},
	{"USD", "840", 2}, {"USN", "997", 2}, {"UYI", "940", 0}, {"UYU", "858", 2},
	{"UYW", "927", 4}, {"UZS", "860", 2}, {"VED", "926", 2}, {"VES", "928", 2},
	{"VND", "704", 0}, {"VUV", "548", 0}, {"WST", "882", 2}, {"XAD", "396", 2},
	{"XAF", "950", 0}, {"XCD", "951", 2}, {"XCG", "532", 2}, {"XOF", "952", 0},
	{"XPF", "953", 0}, {"YER", "886", 2}, {"ZAR", "710", 2}, {"ZMW", "967", 2},
	{"ZWG", "924", 2},
}

var (
	byAlpha   = make(map[string]Currency, len(table))
	byNumeric = make(map[string]Currency, len(table))
)

func init() {
	for _, c := range table {
		byAlpha[c.Alpha] = c
		byNumeric[c.Numeric] = c
	}
}

// Lookup returns the currency of an alphabetic code. The code must be upper
// case, exactly as the API accepts it.
func Lookup(alpha string) (Currency, bool) {
	c, ok := byAlpha[alpha]
	return c, ok
}

// LookupNumeric returns the currency of a 3-digit numeric code ("840").
func LookupNumeric(numeric string) (Currency, bool) {
	c, ok := byNumeric[numeric]
	return c, ok
}

// Known reports whether alpha is an accepted currency code.
func Known(alpha string) bool {
	_, ok := byAlpha[alpha]
	return ok
}
