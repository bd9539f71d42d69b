package acquirer

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

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

// Sandbox is the sandbox acquirer: the outcome is decided by the card number
// (contract section 7). Any Luhn-valid number without a special outcome is
// approved; a number failing the Luhn check is declined 3.08.
//
// It is safe for concurrent use. It keeps one small result per reference,
// for the last referencesMax references: a real acquirer's idempotency
// window is bounded too, and the gateway only repeats a reference while an
// authorisation is pending (seconds), so memory stays flat however many
// orders a node has taken.
type Sandbox struct {
	latency time.Duration

	mu      sync.Mutex
	results map[string]int // by reference, its outcome's index; present = authorised once
	order   []string       // FIFO of references, for eviction
	next    int
	total   int // authorisations made, evicted ones included
	// outcomes are the distinct results without AuthCode and ARN, which
	// follow from the reference: a few dozen at most (decide's outcomes),
	// where a whole result per remembered reference took ~11 MB.
	outcomes []AuthResult
	outcome  map[AuthResult]int
}

// referencesMax bounds the references the sandbox remembers.
const referencesMax = 100_000

// ErrNoReference is returned for a request without a Reference: a caller bug,
// not worth retrying.
var ErrNoReference = errors.New("acquirer: authorisation request without a reference")

// NewSandbox returns a sandbox acquirer answering after latency (0: at once).
func NewSandbox(latency time.Duration) *Sandbox {
	if latency < 0 {
		latency = 0
	}
	return &Sandbox{latency: latency, results: make(map[string]int), order: make([]string, referencesMax),
		outcome: make(map[AuthResult]int)}
}

// Authorize answers after the configured latency, or returns ctx.Err() if ctx
// ends first; in that case nothing was authorised and the same Reference may
// be retried. The first answered call for a Reference makes the
// authorisation; every later call with that Reference, concurrent or not,
// returns the same result without a new authorisation.
func (s *Sandbox) Authorize(ctx context.Context, req AuthRequest) (AuthResult, error) {
	if req.Reference == "" {
		return AuthResult{}, ErrNoReference
	}
	if err := s.wait(ctx); err != nil {
		return AuthResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.results[req.Reference]; ok {
		return s.result(req.Reference, i), nil
	}
	r := decide(req, time.Now().UTC())
	if old := s.order[s.next]; old != "" {
		delete(s.results, old)
	}
	// A copy: the caller's string may be a slice of a much larger one (a
	// decoded log command, sealed card included) that keeping it would
	// keep alive for the next referencesMax authorisations.
	ref := strings.Clone(req.Reference)
	s.order[s.next] = ref
	s.next = (s.next + 1) % len(s.order)
	s.results[ref] = s.outcomeIndex(r)
	s.total++
	return r, nil
}

// outcomeIndex is the index of r's outcome in s.outcomes, added if new.
func (s *Sandbox) outcomeIndex(r AuthResult) int {
	r.AuthCode, r.ARN = "", ""
	i, ok := s.outcome[r]
	if !ok {
		i = len(s.outcomes)
		s.outcomes = append(s.outcomes, r)
		s.outcome[r] = i
	}
	return i
}

// result is the result remembered for reference: its outcome, with the
// AuthCode and ARN an approval of that reference has (decide).
func (s *Sandbox) result(reference string, i int) AuthResult {
	r := s.outcomes[i]
	if r.Approved {
		r.AuthCode, r.ARN = AuthCode(reference), ARN(reference)
	}
	return r
}

// wait sleeps for the latency, honouring ctx.
func (s *Sandbox) wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.latency <= 0 {
		return nil
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Authorizations reports how many distinct authorisations were made for
// reference: 0 or 1.
func (s *Sandbox) Authorizations(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.results[reference]; ok {
		return 1
	}
	return 0
}

// Total reports how many distinct authorisations were made.
func (s *Sandbox) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Enrollment reports the issuer's 3-D Secure enrolment: Enrolled for
// 4000000000003220, NotEnrolled for 4000000000003063, else NotApplicable.
func (s *Sandbox) Enrollment(pan string) Enrollment {
	switch pan {
	case Card3DSEnrolled:
		return Enrolled
	case Card3DSNotEnrolled:
		return NotEnrolled
	}
	return NotApplicable
}

// decide computes the sandbox outcome for a request. It is a pure function of
// the card number, its expiry against now, whether a CVV was given, the 3-D
// Secure data and the reference.
func decide(req AuthRequest, now time.Time) AuthResult {
	cvv := CVVMatch
	if req.CVV == "" {
		cvv = CVVNotProcessed
	}
	decline := func(code, msg string) AuthResult {
		return AuthResult{
			AVSCheck: AVSMatch, CVVCheck: cvv, RiskDecision: RiskAccept,
			DeclineCode: code, DeclineMessage: msg,
		}
	}
	switch req.PAN {
	case CardDoNotHonour:
		return decline(CodeDoNotHonour, MsgDoNotHonour)
	case CardInsufficientFunds:
		return decline(CodeInsufficientFunds, MsgInsufficientFunds)
	case CardExpired:
		return decline(CodeCardExpired, MsgCardExpired)
	case CardInvalidCVV:
		r := decline(CodeInvalidCVV, MsgInvalidCVV)
		r.CVVCheck = CVVNoMatch
		return r
	case CardUnreachable:
		r := decline(CodeAcquirerUnreachable, MsgAcquirerUnreachable)
		r.AVSCheck, r.CVVCheck = AVSUnavailable, CVVNotProcessed
		return r
	case CardRiskBlocked:
		r := decline(CodeBlockedByRisk, MsgBlockedByRisk)
		r.RiskDecision = RiskDecline
		return r
	case Card3DSEnrolled:
		// The issuer demands authentication: 3-D Secure, or a wallet
		// cryptogram (CRYPTOGRAM_3DS), which the device's authentication
		// stands for.
		if !req.ThreeDS.Authenticated && req.Cryptogram == "" {
			return decline(Code3DSFailed, Msg3DSFailed)
		}
	case Card3DSNotEnrolled:
		// The issuer cannot authenticate: only the non-secure payment the
		// merchant asked for goes through (contract section 7, "else
		// 5.01"), not an authentication result or a wallet payment
		// claimed for this card.
		if !req.ThreeDS.NonSecure {
			return decline(Code3DSFailed, Msg3DSFailed)
		}
	}
	if !Luhn(req.PAN) {
		return decline(CodeDoNotHonour, MsgDoNotHonour)
	}
	if expired(req.ExpMonth, req.ExpYear, now) {
		// The API refuses an expired card it is given; a wallet's card or a
		// token's (tokens outlive cards) reaches the issuer, which declines.
		return decline(CodeCardExpired, MsgCardExpired)
	}
	return AuthResult{
		Approved:     true,
		AuthCode:     AuthCode(req.Reference),
		ARN:          ARN(req.Reference),
		AVSCheck:     AVSMatch,
		CVVCheck:     cvv,
		RiskDecision: RiskAccept,
	}
}

// expired reports whether a card expiring in month/year (MM, YYYY) can no
// longer be used at now: a card is good to the end of its month. An expiry
// that does not read as a month is expired.
func expired(month, year string, now time.Time) bool {
	m, merr := strconv.Atoi(month)
	y, yerr := strconv.Atoi(year)
	if merr != nil || yerr != nil || m < 1 || m > 12 {
		return true
	}
	return y < now.Year() || y == now.Year() && time.Month(m) < now.Month()
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
func (s *Sandbox) CardInfo(pan string) CardInfo {
	info := defaultIssuer
	if len(pan) >= 6 {
		if i, ok := sandboxIssuers[pan[:6]]; ok {
			info = i
		}
	}
	info.Brand = Brand(pan)
	return info
}
