package order

import (
	"strings"
	"testing"
)

// A token charge's card is known once the token resolves: CheckTokenCard
// applies a card charge's brand rules then.
func TestCheckTokenCard(t *testing.T) {
	const visa, amex, mastercard = "4111111111111111", "378282246310005", "5555555555554444"
	mpi := func(version, xid string) *ThreeDS { return &ThreeDS{Version: version, XID: xid} }
	for _, tc := range []struct {
		name, pan, cvv string
		mpi            *ThreeDS
		kind           RejectKind
		attr, msg      string
	}{
		{"no cvv, no mpi_data", visa, "", nil, RejectNone, "", ""},
		{"3 digits on visa", visa, "123", nil, RejectNone, "", ""},
		{"4 digits on amex", amex, "1234", nil, RejectNone, "", ""},
		{"4 digits on visa", visa, "1234", nil, RejectCVV, "payment_source.card_cvv", "payment_source.card_cvv should have exactly 3 digits"},
		{"3 digits on amex", amex, "123", nil, RejectCVV, "payment_source.card_cvv",
			"payment_source.card_cvv should have exactly 4 digits for an American Express card"},
		{"2.x visa without xid", visa, "", mpi("2.1.0", ""), RejectNone, "", ""},
		{"2.x mastercard with xid", mastercard, "", mpi("2.1.0", "x1"), RejectNone, "", ""},
		{"2.x mastercard without xid", mastercard, "", mpi("2.1.0", ""), RejectInvalid, "three_ds.mpi_data.xid",
			"three_ds.mpi_data.xid is required with 3-D Secure version 2.x.x and a Mastercard card"},
		{"2.x mastercard with a blank xid", mastercard, "", mpi("2.2.0", " "), RejectInvalid, "three_ds.mpi_data.xid", "Mastercard"},
		{"1.x any card without xid", visa, "", mpi("1.0.2", ""), RejectInvalid, "three_ds.mpi_data.xid", "1.x.x"},
		{"no version, no rule", visa, "", mpi("", ""), RejectNone, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := CheckTokenCard(tc.pan, tc.cvv, tc.mpi)
			if tc.kind == RejectNone {
				if r != nil {
					t.Fatalf("want accepted, got %+v", r)
				}
				return
			}
			if r == nil || r.Kind != tc.kind || r.Attribute != tc.attr || !strings.Contains(r.Message, tc.msg) || len(r.More) != 0 {
				t.Fatalf("got %+v, want kind %d on %s with %q", r, tc.kind, tc.attr, tc.msg)
			}
		})
	}
	// Both at once: every fault listed, a mix is RejectInvalid.
	r := CheckTokenCard(mastercard, "1234", mpi("2.1.0", ""))
	if r == nil || r.Kind != RejectInvalid || r.Attribute != "payment_source.card_cvv" ||
		len(r.More) != 1 || r.More[0].Attribute != "three_ds.mpi_data.xid" {
		t.Fatalf("cvv and xid: want both in one RejectInvalid, got %+v", r)
	}
}
