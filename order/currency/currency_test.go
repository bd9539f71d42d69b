package currency

import "testing"

func TestLookup(t *testing.T) {
	cases := map[string]Currency{
		"USD": {"USD", "840", 2}, "EUR": {"EUR", "978", 2}, "GBP": {"GBP", "826", 2},
		"JPY": {"JPY", "392", 0}, "KRW": {"KRW", "410", 0}, "VND": {"VND", "704", 0},
		"KWD": {"KWD", "414", 3}, "BHD": {"BHD", "048", 3}, "TND": {"TND", "788", 3},
		"CLF": {"CLF", "990", 4}, "UYW": {"UYW", "927", 4}, "XOF": {"XOF", "952", 0},
		"XCG": {"XCG", "532", 2}, "ZWG": {"ZWG", "924", 2}, "SLE": {"SLE", "925", 2},
		"VED": {"VED", "926", 2}, "XAD": {"XAD", "396", 2},
	}
	for code, want := range cases {
		if got, ok := Lookup(code); !ok || got != want {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v", code, got, ok, want)
		}
		if got, ok := LookupNumeric(want.Numeric); !ok || got != want {
			t.Errorf("LookupNumeric(%q) = %+v, %v; want %+v", want.Numeric, got, ok, want)
		}
	}
	for _, code := range []string{"", "usd", "US", "USDX", "XYZ", "XAU", "XXX", "XTS", "XDR", "HRK", "ZWL"} {
		if Known(code) {
			t.Errorf("%q accepted", code)
		}
	}
	for _, num := range []string{"", "000", "84", "0840", "959", "999"} { // 959 is XAU, 999 XXX
		if c, ok := LookupNumeric(num); ok {
			t.Errorf("numeric %q accepted as %s", num, c.Alpha)
		}
	}
}

// TestTable checks the table's shape: every code well formed, a usable
// exponent, and no alphabetic or numeric code twice (a duplicate would make
// a wallet token's numeric code name the wrong currency).
func TestTable(t *testing.T) {
	if len(byAlpha) != len(table) || len(byNumeric) != len(table) {
		t.Errorf("duplicates: %d entries, %d alphabetic codes, %d numeric codes", len(table), len(byAlpha), len(byNumeric))
	}
	if len(table) < 150 {
		t.Errorf("table has only %d codes", len(table))
	}
	for _, c := range table {
		if !allIn(c.Alpha, 'A', 'Z') || len(c.Alpha) != 3 {
			t.Errorf("malformed code %q", c.Alpha)
		}
		if !allIn(c.Numeric, '0', '9') || len(c.Numeric) != 3 {
			t.Errorf("%s: malformed numeric code %q", c.Alpha, c.Numeric)
		}
		if e := c.Exponent; e != 0 && e != 2 && e != 3 && e != 4 {
			t.Errorf("%s: odd exponent %d", c.Alpha, e)
		}
	}
}

func allIn(s string, lo, hi byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < lo || s[i] > hi {
			return false
		}
	}
	return true
}
