package acquirer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func req(ref, pan string) AuthRequest {
	return AuthRequest{
		Reference: ref, PAN: pan, ExpMonth: "12", ExpYear: "2031", HolderName: "JANE DOE",
		CVV: "123", Amount: 1000, Currency: "USD", MerchantID: "m1",
	}
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func checkApproved(t *testing.T, r AuthResult, cvv string) {
	t.Helper()
	if !r.Approved || r.DeclineCode != "" || r.DeclineMessage != "" {
		t.Fatalf("want approved, got %+v", r)
	}
	if len(r.AuthCode) != 6 || strings.Trim(r.AuthCode, authCodeAlphabet) != "" {
		t.Errorf("auth code %q", r.AuthCode)
	}
	if len(r.ARN) != 23 || !isDigits(r.ARN) {
		t.Errorf("arn %q", r.ARN)
	}
	if r.AVSCheck != "Y" || r.CVVCheck != cvv || r.RiskDecision != "accept" {
		t.Errorf("checks avs=%q cvv=%q risk=%q", r.AVSCheck, r.CVVCheck, r.RiskDecision)
	}
}

func TestTestCardsAreLuhnValid(t *testing.T) {
	for _, pan := range []string{
		CardVisaApproved, CardMastercardApproved, CardAmexApproved, CardDoNotHonour,
		CardInsufficientFunds, CardExpired, CardInvalidCVV, CardUnreachable,
		CardRiskBlocked, Card3DSEnrolled, Card3DSNotEnrolled,
	} {
		if !Luhn(pan) {
			t.Errorf("%s fails Luhn", pan)
		}
	}
}

func TestSandboxTestCards(t *testing.T) {
	type want struct {
		approved bool
		code     string
		msg      string
		avs, cvv string
		risk     string
	}
	approved := want{approved: true, avs: "Y", cvv: "M", risk: "accept"}
	declined := func(code, msg string) want {
		return want{code: code, msg: msg, avs: "Y", cvv: "M", risk: "accept"}
	}
	cases := []struct {
		pan  string
		want want
	}{
		{"4111111111111111", approved},
		{"5555555555554444", approved},
		{"378282246310005", approved},
		{"4242424242424242", approved}, // any other Luhn-valid number
		{"6011111111111117", approved}, // discover
		{"3530111333300000", approved}, // jcb
		{"2223003122003222", approved}, // mastercard 2-series
		{"4000000000003063", declined("5.01", "3-D Secure authentication failed or required")}, // not enrolled, no non-secure downgrade asked
		{"4111111111111112", declined("3.08", "Do not honour")},                                // fails Luhn
		{"4000000000000002", declined("3.08", "Do not honour")},
		{"4000000000009995", declined("3.02", "Insufficient funds")},
		{"4000000000000069", declined("2.09", "Card expired")},
		{"4000000000000127", want{code: "2.06", msg: "Invalid CVV", avs: "Y", cvv: "N", risk: "accept"}},
		{"4000000000000119", want{code: "6.02", msg: "Acquirer unreachable", avs: "U", cvv: "P", risk: "accept"}},
		{"4100000000000019", want{code: "4.01", msg: "Blocked by risk rules", avs: "Y", cvv: "M", risk: "decline"}},
		{"4000000000003220", declined("5.01", "3-D Secure authentication failed or required")},
	}
	s := NewSandbox(0)
	for i, tc := range cases {
		t.Run(tc.pan, func(t *testing.T) {
			r, err := s.Authorize(context.Background(), req(fmt.Sprintf("tx-%d", i), tc.pan))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.approved {
				checkApproved(t, r, "M")
				return
			}
			if r.Approved || r.AuthCode != "" || r.ARN != "" {
				t.Fatalf("want declined, got %+v", r)
			}
			got := want{code: r.DeclineCode, msg: r.DeclineMessage, avs: r.AVSCheck, cvv: r.CVVCheck, risk: r.RiskDecision}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if s.Total() != len(cases) {
		t.Errorf("Total %d, want %d", s.Total(), len(cases))
	}
}

func TestSandboxCVVNotProcessed(t *testing.T) {
	s := NewSandbox(0)
	rq := req("tx-nocvv", CardVisaApproved)
	rq.CVV = ""
	r, err := s.Authorize(context.Background(), rq)
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, r, "P")
}

func TestSandboxIdempotent(t *testing.T) {
	s := NewSandbox(0)
	ctx := context.Background()
	r1, err := s.Authorize(ctx, req("tx-1", CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Authorize(ctx, req("tx-1", CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 {
		t.Errorf("results differ:\n%+v\n%+v", r1, r2)
	}
	if n := s.Authorizations("tx-1"); n != 1 {
		t.Errorf("Authorizations = %d, want 1", n)
	}
	// The reference is bound to its first result, whatever the retry carries.
	r3, err := s.Authorize(ctx, req("tx-1", CardDoNotHonour))
	if err != nil || r3 != r1 {
		t.Errorf("retry with other data: %+v %v", r3, err)
	}
	// A declined reference stays declined.
	d1, _ := s.Authorize(ctx, req("tx-2", CardInsufficientFunds))
	d2, _ := s.Authorize(ctx, req("tx-2", CardInsufficientFunds))
	if d1 != d2 || d1.Approved {
		t.Errorf("declined retry: %+v %+v", d1, d2)
	}
	if s.Authorizations("tx-unknown") != 0 {
		t.Error("unknown reference counted")
	}
	if s.Total() != 2 {
		t.Errorf("Total %d, want 2", s.Total())
	}
	// Another reference gets its own codes.
	r4, _ := s.Authorize(ctx, req("tx-3", CardVisaApproved))
	if r4.AuthCode == r1.AuthCode && r4.ARN == r1.ARN {
		t.Error("different references share auth code and ARN")
	}
	// Codes are deterministic across sandbox instances (e.g. after restart).
	r5, _ := NewSandbox(0).Authorize(ctx, req("tx-1", CardVisaApproved))
	if r5 != r1 {
		t.Errorf("new instance: %+v, want %+v", r5, r1)
	}
}

func TestSandboxIdempotentConcurrent(t *testing.T) {
	s := NewSandbox(2 * time.Millisecond)
	const n = 50
	results := make([]AuthResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = s.Authorize(context.Background(), req("tx-same", CardMastercardApproved))
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if results[i] != results[0] {
			t.Fatalf("result %d differs: %+v vs %+v", i, results[i], results[0])
		}
	}
	checkApproved(t, results[0], "M")
	if got := s.Authorizations("tx-same"); got != 1 {
		t.Errorf("Authorizations = %d, want 1", got)
	}
	if s.Total() != 1 {
		t.Errorf("Total = %d, want 1", s.Total())
	}
}

func TestSandboxConcurrentDistinct(t *testing.T) {
	s := NewSandbox(0)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := fmt.Sprintf("tx-%d", i%25)
			if _, err := s.Authorize(context.Background(), req(ref, CardVisaApproved)); err != nil {
				t.Error(err)
			}
			_ = s.Total()
			_ = s.Authorizations(ref)
		}()
	}
	wg.Wait()
	if s.Total() != 25 {
		t.Errorf("Total = %d, want 25", s.Total())
	}
}

func TestSandboxLatency(t *testing.T) {
	const lat = 50 * time.Millisecond
	s := NewSandbox(lat)
	start := time.Now()
	if _, err := s.Authorize(context.Background(), req("tx-lat", CardVisaApproved)); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < lat {
		t.Errorf("answered after %v, want >= %v", el, lat)
	}
}

func TestSandboxContextCancel(t *testing.T) {
	s := NewSandbox(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Authorize(ctx, req("tx-cancel", CardVisaApproved))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want deadline exceeded", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("cancel honoured only after %v", el)
	}
	if s.Authorizations("tx-cancel") != 0 || s.Total() != 0 {
		t.Error("cancelled call authorised")
	}

	// Already cancelled: no authorisation even without latency.
	s0 := NewSandbox(0)
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if _, err := s0.Authorize(cctx, req("tx-c2", CardVisaApproved)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want canceled", err)
	}
	if s0.Total() != 0 {
		t.Error("cancelled call authorised")
	}
	// The same reference can be retried and then authorises once.
	r, err := s0.Authorize(context.Background(), req("tx-c2", CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, r, "M")
	if s0.Authorizations("tx-c2") != 1 {
		t.Error("retry not authorised")
	}
}

func TestSandboxNoReference(t *testing.T) {
	s := NewSandbox(0)
	if _, err := s.Authorize(context.Background(), req("", CardVisaApproved)); !errors.Is(err, ErrNoReference) {
		t.Fatalf("err %v", err)
	}
	if s.Total() != 0 {
		t.Error("authorised without reference")
	}
}

func TestSandbox3DS(t *testing.T) {
	s := NewSandbox(0)
	ctx := context.Background()

	if e := s.Enrollment(Card3DSEnrolled); e != Enrolled || e.Letter() != "Y" {
		t.Errorf("3220 enrollment %v", e)
	}
	if e := s.Enrollment(Card3DSNotEnrolled); e != NotEnrolled || e.Letter() != "N" {
		t.Errorf("3063 enrollment %v", e)
	}
	for _, pan := range []string{CardVisaApproved, CardMastercardApproved, CardAmexApproved, CardDoNotHonour, "4242424242424242"} {
		if e := s.Enrollment(pan); e != NotApplicable {
			t.Errorf("%s enrollment %v, want NotApplicable", pan, e)
		}
	}

	// Enrolled, not authenticated: 5.01.
	r, err := s.Authorize(ctx, req("3ds-none", Card3DSEnrolled))
	if err != nil {
		t.Fatal(err)
	}
	if r.Approved || r.DeclineCode != "5.01" || r.DeclineMessage != Msg3DSFailed {
		t.Errorf("unauthenticated: %+v", r)
	}
	// Data present but not authenticated (challenge failed): 5.01.
	rq := req("3ds-failed", Card3DSEnrolled)
	rq.ThreeDS = ThreeDSData{ECI: "07", Version: "2.2.0"}
	if r, _ := s.Authorize(ctx, rq); r.Approved || r.DeclineCode != "5.01" {
		t.Errorf("failed challenge: %+v", r)
	}
	// Enrolled and authenticated: approved.
	rq = req("3ds-ok", Card3DSEnrolled)
	rq.ThreeDS = ThreeDSData{Authenticated: true, ECI: "05", CAVV: "AAABBBCCC=", XID: "x", Version: "2.2.0"}
	r, err = s.Authorize(ctx, rq)
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, r, "M")
	// Wallet cryptogram counts as authentication.
	rq = req("3ds-wallet", Card3DSEnrolled)
	rq.CVV = ""
	rq.Cryptogram, rq.ECI = "AgAAAAAAAIR8CQrXcIhbQAAAAAA=", "05"
	r, _ = s.Authorize(ctx, rq)
	checkApproved(t, r, "P")
	// Not enrolled: approved only as the non-secure payment the merchant
	// asked for; an authentication or a cryptogram claimed for it is 5.01.
	rq = req("3ds-notenrolled", Card3DSNotEnrolled)
	rq.ThreeDS = ThreeDSData{NonSecure: true}
	r, _ = s.Authorize(ctx, rq)
	checkApproved(t, r, "M")
	for name, claim := range map[string]func(*AuthRequest){
		"no downgrade": func(*AuthRequest) {},
		"an authentication result": func(r *AuthRequest) {
			r.ThreeDS = ThreeDSData{Authenticated: true, ECI: "05", CAVV: "AAABBBCCC=", Version: "2.2.0"}
		},
		"a wallet cryptogram": func(r *AuthRequest) { r.Cryptogram, r.ECI = "AgAAAAAAAIR8CQrXcIhbQAAAAAA=", "05" },
	} {
		rq = req("3ds-notenrolled-"+name, Card3DSNotEnrolled)
		claim(&rq)
		if r, _ := s.Authorize(ctx, rq); r.Approved || r.DeclineCode != "5.01" {
			t.Errorf("not enrolled, %s: %+v", name, r)
		}
	}
	// Authentication data on an ordinary card does no harm.
	rq = req("3ds-plain", CardVisaApproved)
	rq.ThreeDS.Authenticated = true
	r, _ = s.Authorize(ctx, rq)
	checkApproved(t, r, "M")
}

func TestEnrollmentString(t *testing.T) {
	for e, want := range map[Enrollment]string{Enrolled: "enrolled", NotEnrolled: "not_enrolled", NotApplicable: "not_applicable", 9: "unknown"} {
		if e.String() != want {
			t.Errorf("%d: %q", int(e), e.String())
		}
	}
	if NotApplicable.Letter() != "U" {
		t.Error("NotApplicable letter")
	}
	var zero Enrollment
	if zero != NotApplicable {
		t.Error("zero Enrollment is not NotApplicable")
	}
}

func TestAuthCodeAndARN(t *testing.T) {
	codes := make(map[string]bool)
	arns := make(map[string]bool)
	for i := range 2000 {
		ref := fmt.Sprintf("ref-%d", i)
		c, a := AuthCode(ref), ARN(ref)
		if c != AuthCode(ref) || a != ARN(ref) {
			t.Fatal("not deterministic")
		}
		if len(c) != 6 || strings.Trim(c, authCodeAlphabet) != "" {
			t.Fatalf("auth code %q", c)
		}
		if len(a) != 23 || !isDigits(a) || !luhnAny(a) {
			t.Fatalf("arn %q", a)
		}
		codes[c], arns[a] = true, true
	}
	if len(codes) < 1990 || len(arns) != 2000 {
		t.Errorf("poor spread: %d codes, %d arns", len(codes), len(arns))
	}
}

// luhnAny checks the Luhn digit of any digit string (Luhn caps length at 19).
func luhnAny(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		d := int(s[i] - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

func TestLuhn(t *testing.T) {
	cases := map[string]bool{
		"4111111111111111":     true,
		"4111111111111112":     false,
		"378282246310005":      true,
		"79927398713":          false, // valid Luhn but too short for a card
		"":                     false,
		"4111 1111 1111 1111":  false,
		"411111111111111a":     false,
		"4111111111111111000":  false,
		"6011000990139424":     true,
		"12345678901234567890": false, // too long
	}
	for pan, want := range cases {
		if Luhn(pan) != want {
			t.Errorf("Luhn(%q) = %v", pan, !want)
		}
	}
}

func TestCardInfo(t *testing.T) {
	s := NewSandbox(0)
	cases := []struct {
		pan  string
		want CardInfo
	}{
		{"4111111111111111", CardInfo{"visa", "Sandbox Bank", "Credit", "US"}},
		{"5555555555554444", CardInfo{"mastercard", "Sandbox Mastercard Bank", "Debit", "GB"}},
		{"378282246310005", CardInfo{"amex", "Sandbox Amex", "Charge", "US"}},
		{"4000000000000002", CardInfo{"visa", "Sandbox Issuer", "Credit", "US"}},
		{"5105105105105100", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"2221000000000009", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"2720990000000007", CardInfo{"mastercard", "Sandbox Issuer", "Credit", "US"}},
		{"371449635398431", CardInfo{"amex", "Sandbox Issuer", "Credit", "US"}},
		{"340000000000009", CardInfo{"amex", "Sandbox Issuer", "Credit", "US"}},
		{"6011111111111117", CardInfo{"discover", "Sandbox Issuer", "Credit", "US"}},
		{"6500000000000002", CardInfo{"discover", "Sandbox Issuer", "Credit", "US"}},
		{"3528000000000007", CardInfo{"jcb", "Sandbox Issuer", "Credit", "US"}},
		{"3589000000000003", CardInfo{"jcb", "Sandbox Issuer", "Credit", "US"}},
		{"3527000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"3590000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"2220000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"2721000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"5600000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"6012000000000000", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"9999999999999995", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
		{"5", CardInfo{"unknown", "Sandbox Issuer", "Credit", "US"}},
	}
	for _, tc := range cases {
		if got := s.CardInfo(tc.pan); got != tc.want {
			t.Errorf("CardInfo(%q) = %+v, want %+v", tc.pan, got, tc.want)
		}
	}
}

// The sandbox's memory is bounded: old references are forgotten, the count
// of authorisations is not.
func TestSandboxMemoryBounded(t *testing.T) {
	s := NewSandbox(0)
	n := referencesMax + 10
	for i := range n {
		if _, err := s.Authorize(context.Background(), AuthRequest{Reference: fmt.Sprintf("ref-%d", i), PAN: "4111111111111111"}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.results) != referencesMax || s.Total() != n {
		t.Fatalf("remembered %d references, total %d; want %d and %d", len(s.results), s.Total(), referencesMax, n)
	}
	if s.Authorizations("ref-0") != 0 || s.Authorizations(fmt.Sprintf("ref-%d", n-1)) != 1 {
		t.Fatal("the oldest reference must be the one forgotten")
	}
}

// A card is good to the end of its expiry month: the sandbox declines it
// after that (2.09), as an issuer would, whatever path it came by (a
// wallet's card, a token's).
func TestSandboxDeclinesExpiredCards(t *testing.T) {
	now := time.Date(2026, time.November, 25, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		month, year string
		expired     bool
	}{
		{"11", "2026", false}, {"12", "2026", false}, {"01", "2027", false},
		{"10", "2026", true}, {"12", "2025", true}, {"01", "2020", true},
		{"13", "2030", true}, {"", "", true}, {"ab", "2030", true},
	} {
		rq := req("exp-"+c.month+"-"+c.year, CardVisaApproved)
		rq.ExpMonth, rq.ExpYear = c.month, c.year
		r := decide(rq, now)
		if c.expired && (r.Approved || r.DeclineCode != CodeCardExpired) || !c.expired && !r.Approved {
			t.Errorf("%s/%s: %+v, expired %v", c.month, c.year, r, c.expired)
		}
	}
}
