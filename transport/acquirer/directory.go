package acquirer

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"

	"github.com/paygate/gateway/order/card"
)

// Sandbox test cards (contract section 7).
const (
	CardVisaApproved       = "4111111111111111"
	CardMastercardApproved = "5555555555554444"
	CardAmexApproved       = "378282246310005"
	CardDoNotHonour        = "4000000000000002"
	CardInsufficientFunds  = "4000000000009995"
	CardExpired            = "4000000000000069"
	CardInvalidCVV         = "4000000000000127"
	CardUnreachable        = "4000000000000119"
	CardRiskBlocked        = "4100000000000019"
	Card3DSEnrolled        = "4000000000003220"
	Card3DSNotEnrolled     = "4000000000003063"
)

// SandboxDirectory answers the two questions that are not acquirer
// messages: the issuer's 3-D Secure enrolment (a directory server's answer)
// and the BIN lookup, from the sandbox's tables. Embed it to complete an
// Acquirer.
type SandboxDirectory struct{}

// Enrollment reports the issuer's 3-D Secure enrolment: Enrolled for
// 4000000000003220, NotEnrolled for 4000000000003063, else NotApplicable.
func (SandboxDirectory) Enrollment(pan string) Enrollment {
	switch pan {
	case Card3DSEnrolled:
		return Enrolled
	case Card3DSNotEnrolled:
		return NotEnrolled
	}
	return NotApplicable
}

// sandboxIssuers is the sandbox issuer table by BIN (first 6 digits).
var sandboxIssuers = map[string]CardInfo{
	"411111": {Issuer: "Sandbox Bank", Type: TypeCredit, Country: "US"},
	"555555": {Issuer: "Sandbox Mastercard Bank", Type: TypeDebit, Country: "GB"},
	"378282": {Issuer: "Sandbox Amex", Type: TypeCharge, Country: "US"},
}

// defaultIssuer answers for BINs not in the table.
var defaultIssuer = CardInfo{Issuer: "Sandbox Issuer", Type: TypeCredit, Country: "US"}

// CardInfo looks up the card's brand by prefix and its issuer, type and
// country in the sandbox BIN table.
func (SandboxDirectory) CardInfo(pan string) CardInfo {
	info := defaultIssuer
	if len(pan) >= 6 {
		if i, ok := sandboxIssuers[pan[:6]]; ok {
			info = i
		}
	}
	info.Brand = Brand(pan)
	return info
}

const authCodeAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func referenceMAC(pool *sync.Pool, reference string) [sha256.Size]byte {
	m := pool.Get().(*referenceMACState)
	m.in = append(m.in[:0], reference...)
	m.mac.Write(m.in)
	m.mac.Sum(m.sum[:0])
	sum := m.sum
	m.mac.Reset()
	pool.Put(m)
	return sum
}

// referenceMACState is a keyed HMAC state with room for the reference's
// bytes (Write takes no string) and for the sum: neither allocates per
// call. Nothing of it leaves referenceMAC.
type referenceMACState struct {
	mac hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// Keyed HMAC states per label, pooled: the key schedule (two SHA-256 blocks
// and two allocations) cost more than the MAC itself on every
// authorisation.
var (
	authCodeMACs = newMACPool("auth-code")
	arnMACs      = newMACPool("arn")
)

func newMACPool(label string) *sync.Pool {
	key := []byte("paygate-sandbox-acquirer/" + label)
	return &sync.Pool{New: func() any { return &referenceMACState{mac: hmac.New(sha256.New, key)} }}
}

// AuthCode returns the sandbox authorisation code for a reference: 6
// uppercase alphanumerics derived from HMAC-SHA256 of the reference.
func AuthCode(reference string) string {
	sum := referenceMAC(authCodeMACs, reference)
	var b [6]byte
	for i := range b {
		b[i] = authCodeAlphabet[int(sum[i])%len(authCodeAlphabet)]
	}
	return string(b[:])
}

// ARN returns the sandbox acquirer reference number for a reference: 23
// digits derived from HMAC-SHA256 of the reference, starting with 7 and
// ending with a Luhn check digit.
func ARN(reference string) string {
	sum := referenceMAC(arnMACs, reference)
	b := make([]byte, 0, 23)
	b = append(b, '7')
	for i := range 21 {
		b = append(b, '0'+sum[i]%10)
	}
	return string(append(b, card.CheckDigit(b)))
}

// DecideTestCard is the sandbox's decision of an authorisation by its test
// card (contract section 7): the ISO 8583 response code and the AVS and
// CVV letters, from the card number, whether a CVV came, the 3-D Secure
// result ("Y" authenticated, "N" non-secure asked for, "" none) and whether
// a wallet cryptogram came. The Luhn check and the expiry come after it
// (the host's decideCard).
func DecideTestCard(pan string, hasCVV bool, threeDS string, hasCryptogram bool) (code, avs, cvv string) {
	code, avs, cvv = RespApproved, AVSMatch, CVVMatch
	if !hasCVV {
		cvv = CVVNotProcessed
	}
	switch pan {
	case CardDoNotHonour:
		code = RespDoNotHonour
	case CardInsufficientFunds:
		code = RespInsufficientFunds
	case CardExpired:
		code = RespExpiredCard
	case CardInvalidCVV:
		code, cvv = RespCVVFailed, CVVNoMatch
	case CardUnreachable:
		code, avs, cvv = RespIssuerUnavailable, AVSUnavailable, CVVNotProcessed
	case CardRiskBlocked:
		code = RespSuspectedFraud
	case Card3DSEnrolled:
		// The issuer demands authentication: 3-D Secure, or a wallet
		// cryptogram, which the device's authentication stands for.
		if threeDS != "Y" && !hasCryptogram {
			code = RespAuthenticationNeeded
		}
	case Card3DSNotEnrolled:
		// The issuer cannot authenticate: only the non-secure payment the
		// merchant asked for goes through.
		if threeDS != "N" {
			code = RespAuthenticationNeeded
		}
	}
	return code, avs, cvv
}
