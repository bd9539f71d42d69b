package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/paygate/gateway/internal/syncbuf"
	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/host"
)

// sandbox is a real host on a loopback port and a link to it.
type sandbox struct {
	host *host.Host
	addr string
	dir  string
	acq  *Acquirer
}

func startHost(t *testing.T, dir, addr string) (*host.Host, string) {
	t.Helper()
	h, err := host.Open(host.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // the old listener's port is being released
	}
	if err != nil {
		t.Fatal(err)
	}
	go h.Serve(ln)
	t.Cleanup(func() { h.Close() })
	return h, ln.Addr().String()
}

func newSandbox(t *testing.T, cfg Config) *sandbox {
	t.Helper()
	s := &sandbox{dir: t.TempDir()}
	s.host, s.addr = startHost(t, s.dir, "127.0.0.1:0")
	cfg.Addr = s.addr
	c := Dial(cfg)
	t.Cleanup(c.Close)
	s.acq = NewAcquirer(c)
	return s
}

func req(ref, pan string) acquirer.AuthRequest {
	return acquirer.AuthRequest{
		Reference: ref, PAN: pan, ExpMonth: "12", ExpYear: "2031", HolderName: "JANE DOE",
		CVV: "123", Amount: 1000, Currency: "USD", MerchantID: "m1",
	}
}

// wantApproval is the approval the sandbox host gives ref: its auth code
// is a function of the MID and RRN, so a result matched to the wrong
// request shows.
func checkApproved(t *testing.T, ref string, r acquirer.AuthResult, cvv string) {
	t.Helper()
	mid := acquirer.CardAcceptorID("", "m1")
	rrn := acquirer.RRN(ref)
	if !r.Approved || r.DeclineCode != "" || r.AuthCode != acquirer.AuthCode(mid+rrn) || r.ARN != acquirer.ARN(mid+rrn) {
		t.Fatalf("%s: want the approval of its own RRN, got %+v", ref, r)
	}
	if r.AVSCheck != "Y" || r.CVVCheck != cvv || r.RiskDecision != "accept" {
		t.Errorf("%s: checks avs=%q cvv=%q risk=%q", ref, r.AVSCheck, r.CVVCheck, r.RiskDecision)
	}
}

// The test cards of contract section 7, through the codec, TCP and the
// host, come back as the contract's decline codes.
func TestTestCardsThroughTheLink(t *testing.T) {
	s := newSandbox(t, Config{})
	type want struct{ code, msg, avs, cvv, risk string }
	declined := func(code, msg string) want { return want{code, msg, "Y", "M", "accept"} }
	cases := []struct {
		pan  string
		want *want
	}{
		{"4111111111111111", nil}, {"5555555555554444", nil}, {"378282246310005", nil},
		{"4242424242424242", nil}, {"6011111111111117", nil}, {"2223003122003222", nil},
		{"4000000000003063", &want{"5.01", acquirer.Msg3DSFailed, "Y", "M", "accept"}},
		{"4111111111111112", ptr(declined("3.08", "Do not honour"))},
		{"4000000000000002", ptr(declined("3.08", "Do not honour"))},
		{"4000000000009995", ptr(declined("3.02", "Insufficient funds"))},
		{"4000000000000069", ptr(declined("2.09", "Card expired"))},
		{"4000000000000127", &want{"2.06", "Invalid CVV", "Y", "N", "accept"}},
		{"4000000000000119", &want{"6.02", "Acquirer unreachable", "U", "P", "accept"}},
		{"4100000000000019", &want{"4.01", "Blocked by risk rules", "Y", "M", "decline"}},
		{"4000000000003220", ptr(declined("5.01", acquirer.Msg3DSFailed))},
	}
	for i, tc := range cases {
		ref := fmt.Sprintf("card-%d", i)
		r, err := s.acq.Authorize(context.Background(), req(ref, tc.pan))
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil {
			checkApproved(t, ref, r, "M")
			continue
		}
		got := want{r.DeclineCode, r.DeclineMessage, r.AVSCheck, r.CVVCheck, r.RiskDecision}
		if r.Approved || r.AuthCode != "" || got != *tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.pan, r, *tc.want)
		}
	}
	if n := s.host.Total(); n != len(cases) {
		t.Errorf("host decided %d, want %d", n, len(cases))
	}
	// No CVV (a resumed payment): approved, CVV not processed.
	rq := req("no-cvv", acquirer.CardVisaApproved)
	rq.CVV = ""
	r, err := s.acq.Authorize(context.Background(), rq)
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, "no-cvv", r, "P")
	// An expiry in the past, or none readable: declined 2.09.
	for _, exp := range [][2]string{{"01", "2020"}, {"", ""}, {"13", "2030"}} {
		rq := req("exp-"+exp[0]+exp[1], acquirer.CardVisaApproved)
		rq.ExpMonth, rq.ExpYear = exp[0], exp[1]
		if r, err := s.acq.Authorize(context.Background(), rq); err != nil || r.DeclineCode != "2.09" {
			t.Errorf("expiry %v: %+v %v", exp, r, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// 3-D Secure and wallet data reach the host in field 48 and decide the
// enrolled test cards.
func TestThreeDSThroughTheLink(t *testing.T) {
	s := newSandbox(t, Config{})
	ctx := context.Background()
	rq := req("3ds-ok", acquirer.Card3DSEnrolled)
	rq.ThreeDS = acquirer.ThreeDSData{Authenticated: true, ECI: "05", CAVV: "AAABBBCCC=", XID: "x", Version: "2.2.0"}
	r, err := s.acq.Authorize(ctx, rq)
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, "3ds-ok", r, "M")
	rq = req("3ds-wallet", acquirer.Card3DSEnrolled)
	rq.CVV, rq.Cryptogram, rq.ECI = "", "AgAAAAAAAIR8CQrXcIhbQAAAAAA=", "05"
	r, _ = s.acq.Authorize(ctx, rq)
	checkApproved(t, "3ds-wallet", r, "P")
	rq = req("3ds-failed", acquirer.Card3DSEnrolled)
	rq.ThreeDS = acquirer.ThreeDSData{ECI: "07", Version: "2.2.0"}
	if r, _ := s.acq.Authorize(ctx, rq); r.DeclineCode != "5.01" {
		t.Errorf("failed challenge: %+v", r)
	}
	rq = req("3ds-nonsecure", acquirer.Card3DSNotEnrolled)
	rq.ThreeDS = acquirer.ThreeDSData{NonSecure: true}
	r, _ = s.acq.Authorize(ctx, rq)
	checkApproved(t, "3ds-nonsecure", r, "M")
	rq = req("3ds-claimed", acquirer.Card3DSNotEnrolled)
	rq.Cryptogram, rq.ECI = "AgAAAAAAAIR8CQrXcIhbQAAAAAA=", "05"
	if r, _ := s.acq.Authorize(ctx, rq); r.DeclineCode != "5.01" {
		t.Errorf("a cryptogram claimed for a not-enrolled card: %+v", r)
	}
}

// Many requests share the connection; each gets its own answer.
func TestConcurrentRequestsMatched(t *testing.T) {
	s := newSandbox(t, Config{})
	s.host.SetFaults(host.Faults{LatencyMS: 5}) // answers overlap and come back out of order
	cards := []string{acquirer.CardVisaApproved, acquirer.CardDoNotHonour, acquirer.CardInsufficientFunds, acquirer.CardMastercardApproved}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := fmt.Sprintf("conc-%d", i)
			pan := cards[i%len(cards)]
			r, err := s.acq.Authorize(context.Background(), req(ref, pan))
			mid := acquirer.CardAcceptorID("", "m1")
			switch {
			case err != nil:
				errs <- err
			case (pan == acquirer.CardVisaApproved || pan == acquirer.CardMastercardApproved) &&
				r.AuthCode != acquirer.AuthCode(mid+acquirer.RRN(ref)):
				errs <- fmt.Errorf("%s: approval of another request: %+v", ref, r)
			case pan == acquirer.CardDoNotHonour && r.DeclineCode != "3.08",
				pan == acquirer.CardInsufficientFunds && r.DeclineCode != "3.02":
				errs <- fmt.Errorf("%s (%s): answer of another request: %+v", ref, pan, r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.host.Total(); n != 400 {
		t.Errorf("host decided %d, want 400", n)
	}
}

// Every answer sent twice: the second finds no request and is dropped,
// and nothing is authorised twice.
func TestDuplicateAnswersIgnored(t *testing.T) {
	s := newSandbox(t, Config{})
	s.host.SetFaults(host.Faults{DuplicateAnswers: 1})
	before := unmatchedAnswers.Get()
	for i := range 20 {
		ref := fmt.Sprintf("dup-%d", i)
		r, err := s.acq.Authorize(context.Background(), req(ref, acquirer.CardVisaApproved))
		if err != nil {
			t.Fatal(err)
		}
		checkApproved(t, ref, r, "M")
	}
	waitFor(t, "20 duplicates counted", func() bool { return unmatchedAnswers.Get()-before >= 20 })
	if n := s.host.Total(); n != 20 {
		t.Errorf("host decided %d, want 20", n)
	}
}

// A dropped answer times out; the repeat, with the same RRN and STAN, gets
// the first answer and authorises nothing more.
func TestDroppedAnswerTimesOutAndTheRepeatGetsTheFirstAnswer(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 300 * time.Millisecond})
	s.host.SetFaults(host.Faults{DropAnswers: 1})
	timeoutsBefore := timeouts("0100").Get()
	_, err := s.acq.Authorize(context.Background(), req("dropped", acquirer.CardVisaApproved))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error %v, want ErrTimeout", err)
	}
	if timeouts("0100").Get() != timeoutsBefore+1 {
		t.Error("the timeout was not counted")
	}
	if s.host.Authorizations(acquirer.RRN("dropped")) != 1 {
		t.Fatal("the host did not decide the request whose answer it dropped")
	}
	s.acq.mu.Lock()
	stan := s.acq.stans["dropped"]
	s.acq.mu.Unlock()
	if len(stan) != 6 {
		t.Fatalf("STAN of the unanswered request not kept for its repeat: %q", stan)
	}
	s.host.SetFaults(host.Faults{})
	r, err := s.acq.Authorize(context.Background(), req("dropped", acquirer.CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, "dropped", r, "M")
	if n := s.host.Total(); n != 1 {
		t.Fatalf("host decided %d, want 1", n)
	}
}

// The host goes away and comes back on the same address with its ledger:
// the link reconnects by itself, and a repeat after the restart still gets
// the first answer.
func TestReconnectAfterHostRestart(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 2 * time.Second})
	first, err := s.acq.Authorize(context.Background(), req("before", acquirer.CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	s.host.Close()
	waitFor(t, "the link to notice", func() bool { return !s.acq.Client().Connected() })
	h2, _ := startHost(t, s.dir, s.addr)
	waitFor(t, "the link to reconnect", s.acq.Client().Connected)
	again, err := s.acq.Authorize(context.Background(), req("before", acquirer.CardVisaApproved))
	// The repeat is its own message (its STAN and time): the decision is
	// the first one's.
	again.Trace, first.Trace = "", ""
	if err != nil || again != first {
		t.Fatalf("repeat after restart: %+v %v, want %+v", again, err, first)
	}
	r, err := s.acq.Authorize(context.Background(), req("after", acquirer.CardVisaApproved))
	if err != nil {
		t.Fatal(err)
	}
	checkApproved(t, "after", r, "M")
	if n := h2.Total(); n != 1 {
		t.Fatalf("restarted host decided %d, want 1 (the repeat is not a new one)", n)
	}
}

// A host that is down: requests fail (to be repeated) rather than hang;
// once it is up again they go through.
func TestHostDown(t *testing.T) {
	s := newSandbox(t, Config{Timeout: 300 * time.Millisecond})
	s.host.SetFaults(host.Faults{Down: true})
	if _, err := s.acq.Authorize(context.Background(), req("down", acquirer.CardVisaApproved)); err == nil {
		t.Fatal("authorised by a host that is down")
	}
	s.host.SetFaults(host.Faults{})
	// The link may still hold a connection the host accepted and closed
	// while down: the first try can fail ErrConnectionLost, and the
	// caller repeats it (package doc), as the order actor does.
	var r acquirer.AuthResult
	waitFor(t, "an authorisation through the host back up", func() bool {
		var err error
		r, err = s.acq.Authorize(context.Background(), req("down", acquirer.CardVisaApproved))
		if err != nil && !errors.Is(err, ErrConnectionLost) && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		return err == nil
	})
	checkApproved(t, "down", r, "M")
}

// An idle line gets an 0800 echo, answered 0810.
func TestEchoWhenIdle(t *testing.T) {
	before := histogramCount(t, `gateway_acquirer_round_trip_seconds_count{mti="0800"}`)
	s := newSandbox(t, Config{EchoIdle: 40 * time.Millisecond})
	waitFor(t, "two echoes", func() bool {
		return histogramCount(t, `gateway_acquirer_round_trip_seconds_count{mti="0800"}`) >= before+2
	})
	if err := s.acq.Client().Echo(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func histogramCount(t *testing.T, line string) int {
	var b strings.Builder
	metrics.WritePrometheus(&b, false)
	for _, l := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(l, line+" "); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// STANs are 6 digits, unique among the requests waiting.
func TestSTANAllocation(t *testing.T) {
	c := &Client{pending: map[string]*call{}, stan: 999_998}
	c.pending["000001"] = &call{}
	got := []string{c.NextSTAN(), c.NextSTAN()}
	if got[0] != "999999" || got[1] != "000002" {
		t.Fatalf("STANs %v, want 999999 then 000002 (000001 is waiting)", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// One authorisation through the link and the host on loopback, both in
// this process: the cost docs/acquirer.md measures per charge.
func BenchmarkAuthorize(b *testing.B) {
	h, err := host.Open(host.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go h.Serve(ln)
	c := Dial(Config{Addr: ln.Addr().String()})
	defer c.Close()
	acq := NewAcquirer(c)
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := acq.Authorize(context.Background(), req(fmt.Sprintf("bench-%d", n.Add(1)), acquirer.CardVisaApproved)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// Card data never reaches a log: a session of approvals, declines, a
// timeout, a malformed frame and a lost connection, logged at debug level
// on both sides, holds no card number and no CVV.
func TestLogsHoldNoCardData(t *testing.T) {
	var logs syncbuf.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dir := t.TempDir()
	h, err := host.Open(host.Config{DataDir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.Serve(ln)
	defer h.Close()
	c := Dial(Config{Addr: ln.Addr().String(), Timeout: 300 * time.Millisecond, Logger: logger})
	defer c.Close()
	acq := NewAcquirer(c)
	const cvv = "987"
	for i, pan := range []string{acquirer.CardVisaApproved, acquirer.CardDoNotHonour, "4111111111111112"} {
		rq := req(fmt.Sprintf("log-%d", i), pan)
		rq.CVV = cvv
		acq.Authorize(context.Background(), rq)
	}
	h.SetFaults(host.Faults{DropAnswers: 1})
	acq.Authorize(context.Background(), req("log-drop", acquirer.CardMastercardApproved))
	// A frame that is no message, holding a card number, straight to the host.
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte{0, 29}, []byte("0100\x40\x00\x00\x00\x00\x00\x00\x0016411111111111111")...)
	raw.Write(bad)
	waitFor(t, "the malformed frame to be logged", func() bool { return strings.Contains(logs.String(), "malformed") })
	raw.Close()
	h.SetFaults(host.Faults{Down: true})
	acq.Authorize(context.Background(), req("log-down", acquirer.CardAmexApproved))
	out := logs.String()
	for _, secret := range []string{acquirer.CardVisaApproved, acquirer.CardDoNotHonour, "4111111111111112", acquirer.CardMastercardApproved,
		acquirer.CardAmexApproved, "411111111111111", "CV003"} {
		if strings.Contains(out, secret) {
			t.Fatalf("the logs hold %q:\n%s", secret, out)
		}
	}
	ledger, _ := os.ReadFile(filepath.Join(dir, "ledger-"+time.Now().UTC().Format(time.DateOnly)+".jsonl"))
	// (The CVV's 3 digits could turn up in a timestamp: the ledger has no
	// place for one, host's TestLedgerHoldsNoCardData checks the field.)
	if len(ledger) == 0 || strings.Contains(string(ledger), acquirer.CardVisaApproved) {
		t.Fatalf("ledger empty or holding card data:\n%s", ledger)
	}
}
