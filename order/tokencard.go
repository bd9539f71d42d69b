package order

import (
	"strings"

	"github.com/paygate/gateway/order/card"
)

// Attributes of a token charge that CheckTokenCard judges.
const (
	attrCardCVV = "payment_source.card_cvv"
	attrXID     = "three_ds.mpi_data.xid"
)

// CheckTokenCard applies a card charge's brand rules to what a token charge
// says about its card, which is known only once the token resolves: the
// order actor calls it then, before anything is proposed. cvv is
// payment_source.card_cvv ("" when absent) and mpi the external MPI data (nil
// without). The rules and messages are a card charge's (transport/api uses
// the same card.CVVProblem and XIDProblem): card_cvv of the brand's length
// (RejectCVV), an xid with 3-D Secure 2.x.x and a Mastercard card
// (RejectInvalid); both at once is RejectInvalid listing both.
func CheckTokenCard(pan, cvv string, mpi *ThreeDS) *Rejection {
	var r *Rejection
	add := func(kind RejectKind, attr, msg string) {
		if r == nil {
			r = &Rejection{Kind: kind, Attribute: attr, Message: msg}
			return
		}
		r.Kind = RejectInvalid // a mix of rules
		r.More = append(r.More, Fault{Attribute: attr, Message: msg})
	}
	if cvv != "" {
		if why := card.CVVProblem(cvv, pan, true); why != "" {
			add(RejectCVV, attrCardCVV, attrCardCVV+" "+why)
		}
	}
	if mpi != nil {
		if major, ok := ThreeDSMajor(mpi.Version); ok && strings.TrimSpace(mpi.XID) == "" {
			if why := XIDProblem(major, pan); why != "" {
				add(RejectInvalid, attrXID, attrXID+" "+why)
			}
		}
	}
	return r
}

// XIDProblem says why 3-D Secure data of version major (ThreeDSMajor) for
// the card pan needs an xid it lacks (interface 4.3), or "" when it needs
// none: 1.x.x with any card, 2.x.x with a Mastercard card (pan "" when the
// card is not known yet). The answer ends a sentence whose subject is the
// xid's attribute.
func XIDProblem(major int, pan string) string {
	switch {
	case major == 1:
		return "is required with 3-D Secure version 1.x.x"
	case major == 2 && card.IsMastercard(pan):
		return "is required with 3-D Secure version 2.x.x and a Mastercard card"
	}
	return ""
}

// ThreeDSMajor parses a 3-D Secure version of one to three dot-separated
// numbers whose first is 1 or 2 ("1.0.2", "2.2.0", "2.1") and returns its
// major number.
func ThreeDSMajor(s string) (int, bool) {
	parts, first := 0, "" // counted as they go by: no slice of them per request
	for p := range strings.SplitSeq(s, ".") {
		if parts++; parts == 1 {
			first = p
		}
		if parts > 3 || !card.Digits(p) {
			return 0, false
		}
	}
	switch first {
	case "1":
		return 1, true
	case "2":
		return 2, true
	}
	return 0, false
}
