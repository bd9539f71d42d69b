package host

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/iso8583"
)

var testNow = time.Date(2026, 11, 28, 10, 30, 0, 0, time.UTC)

func openHost(t *testing.T, dir string) (*Host, string) {
	t.Helper()
	return openHostWith(t, Config{DataDir: dir, Now: func() time.Time { return testNow }})
}

// openHostWith opens a host with cfg and serves it on a free loopback port
// until the test ends.
func openHostWith(t *testing.T, cfg Config) (*Host, string) {
	t.Helper()
	h, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go h.Serve(ln)
	t.Cleanup(func() { h.Close() })
	return h, ln.Addr().String()
}

// exchange sends m on a new connection and reads one answer.
func exchange(t *testing.T, addr string, m *iso8583.Message) *iso8583.Message {
	t.Helper()
	a, err := exchangeErr(addr, m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const mid = "SHOP01         "

func financial(mti, proc, stan, rrn, pan string, amount int64) *iso8583.Message {
	m := iso8583.New(mti).Set(iso8583.FieldProcessingCode, proc).SetNumber(iso8583.FieldAmount, amount).
		Set(iso8583.FieldTransmissionTime, "1128103000").Set(iso8583.FieldSTAN, stan).Set(iso8583.FieldRRN, rrn).
		Set(iso8583.FieldTerminalID, "PAYGATE1").Set(iso8583.FieldCardAcceptorID, mid).Set(iso8583.FieldCurrency, "840")
	if pan != "" {
		m.Set(iso8583.FieldPAN, pan).Set(iso8583.FieldExpiry, "3112").Set(iso8583.FieldAdditionalData, "CV003123")
	}
	return m
}

// advice is a capture (0220) or reversal (0400) of the original sent with
// stan at 1128103000.
func advice(mti, stan, rrn, origMTI, origSTAN string, amount int64) *iso8583.Message {
	return financial(mti, "000000", stan, rrn, "", amount).
		Set(iso8583.FieldOriginalDataElement, origMTI+origSTAN+"1128103000"+strings.Repeat("0", 22))
}

// A repeat, concurrent or after a restart, gets the first answer and is
// decided once.
func TestRepeatAnsweredOnceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	h, addr := openHost(t, dir)
	var wg sync.WaitGroup
	answers := make([]*iso8583.Message, 8)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = exchange(t, addr, financial("0100", "000000", fmt.Sprintf("%06d", i+1), "RRN000000001", acquirer.CardVisaApproved, 1000))
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if a.MTI != "0110" || a.Value(39) != "00" || a.Value(38) != answers[0].Value(38) || a.Value(11) != fmt.Sprintf("%06d", i+1) {
			t.Fatalf("answer %d: %s, want the first answer (%s) with its own STAN", i, a.Dump(), answers[0].Dump())
		}
	}
	if h.Total() != 1 {
		t.Fatalf("decided %d times", h.Total())
	}
	h.Close()
	h2, addr2 := openHost(t, dir)
	again := exchange(t, addr2, financial("0100", "000000", "000001", "RRN000000001", acquirer.CardVisaApproved, 1000))
	if again.Value(38) != answers[0].Value(38) || again.Value(48) != answers[0].Value(48) || h2.Total() != 0 {
		t.Fatalf("after restart: %s (decided %d), want %s", again.Dump(), h2.Total(), answers[0].Dump())
	}
}

// An authorisation's record is in the ledger file when its answer leaves,
// though not fsynced: a host killed right after answering (here: left
// running, never closed, so nothing syncs or flushes on the way out) is
// replaced by one that reads the record and answers the repeat with the
// first answer, deciding nothing.
func TestAuthorisationRecordedBeforeItsAnswer(t *testing.T) {
	dir := t.TempDir()
	h, addr := openHost(t, dir) // closed only at the test's end: the second host reads what it left in the file
	first := exchange(t, addr, financial("0100", "000000", "000001", "RRN000000077", acquirer.CardVisaApproved, 1000))
	if first.Value(39) != "00" || h.Total() != 1 {
		t.Fatalf("first answer %s, decided %d", first.Dump(), h.Total())
	}
	h2, addr2 := openHost(t, dir)
	again := exchange(t, addr2, financial("0100", "000000", "000002", "RRN000000077", acquirer.CardVisaApproved, 1000))
	if again.Value(38) != first.Value(38) || again.Value(48) != first.Value(48) || h2.Total() != 0 {
		t.Fatalf("repeat to a host started beside the first: %s (decided %d), want %s", again.Dump(), h2.Total(), first.Dump())
	}
}

// The ledger holds no card number and no CVV.
func TestLedgerHoldsNoCardData(t *testing.T) {
	dir := t.TempDir()
	_, addr := openHost(t, dir)
	exchange(t, addr, financial("0100", "000000", "000001", "RRN000000001", acquirer.CardVisaApproved, 1000))
	b, err := os.ReadFile(filepath.Join(dir, "ledger-2026-11-28.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The record has no field for the card number or the CVV; neither
	// the number nor field 48's CVV element may turn up anywhere in it.
	if len(b) == 0 || bytes.Contains(b, []byte(acquirer.CardVisaApproved)) || bytes.Contains(b, []byte("CV003123")) {
		t.Fatalf("ledger holds card data: %s", b)
	}
}

// Captures, sales, refunds and reversals make the settlement report; a
// capture beyond what was authorised, or of a reversed authorisation, is
// refused.
func TestMovementsAndSettlementReport(t *testing.T) {
	h, addr := openHost(t, t.TempDir())
	ok := func(m *iso8583.Message, want string) {
		t.Helper()
		if a := exchange(t, addr, m); a.Value(39) != want || a.MTI != m.MTI[:2]+string(m.MTI[2]+1)+"0" {
			t.Fatalf("%s answered %s, want %s", m.MTI, a.Dump(), want)
		}
	}
	ok(financial("0100", "000000", "000001", "AUTH00000001", acquirer.CardVisaApproved, 1000), "00")
	ok(advice("0220", "000002", "CAPT00000001", "0100", "000001", 600), "00")
	ok(advice("0221", "000002", "CAPT00000001", "0100", "000001", 600), "00") // repeat: no second capture
	ok(advice("0220", "000003", "CAPT00000002", "0100", "000001", 500), acquirer.RespInvalidTransaction)
	ok(advice("0220", "000004", "CAPT00000003", "0100", "000001", 400), "00")
	ok(financial("0200", "000000", "000005", "SALE00000001", acquirer.CardMastercardApproved, 2500), "00")
	ok(financial("0200", "000000", "000006", "SALE00000002", acquirer.CardVisaApproved, 700), "00")
	ok(advice("0400", "000007", "SALE00000002", "0200", "000006", 700), "00")
	ok(advice("0401", "000007", "SALE00000002", "0200", "000006", 700), "00")
	ok(financial("0200", "200000", "000008", "RFND00000001", acquirer.CardMastercardApproved, 300), "00")
	ok(financial("0100", "000000", "000009", "AUTH00000002", acquirer.CardVisaApproved, 900), "00")
	ok(advice("0400", "000010", "AUTH00000002", "0100", "000009", 900), "00")
	ok(advice("0220", "000011", "CAPT00000004", "0100", "000009", 900), acquirer.RespInvalidTransaction)
	ok(financial("0200", "000000", "000012", "SALE00000003", acquirer.CardDoNotHonour, 100), "05")
	ok(advice("0220", "000013", "CAPT00000005", "0100", "999999", 100), acquirer.RespInvalidTransaction)
	ok(iso8583.New("0100").Set(iso8583.FieldSTAN, "000014").Set(iso8583.FieldTransmissionTime, "1128103000"), acquirer.RespFormatError)
	ok(iso8583.New("0800").Set(iso8583.FieldSTAN, "000015").Set(iso8583.FieldTransmissionTime, "1128103000").Set(70, "301"), "00")

	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/settlement-report?date=2026-11-28")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	arn := func(rrn string) string { return acquirer.ARN(mid + rrn) }
	want := [][]string{
		{"date", "mid", "rrn", "arn", "type", "amount", "currency"},
		{"2026-11-28", "SHOP01", "CAPT00000001", arn("CAPT00000001"), "capture", "600", "USD"},
		{"2026-11-28", "SHOP01", "CAPT00000003", arn("CAPT00000003"), "capture", "400", "USD"},
		{"2026-11-28", "SHOP01", "SALE00000001", arn("SALE00000001"), "sale", "2500", "USD"},
		{"2026-11-28", "SHOP01", "RFND00000001", arn("RFND00000001"), "refund", "300", "USD"},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("report\n%v\nwant\n%v", rows, want)
	}
	resp, _ = http.Get(srv.URL + "/settlement-report?date=2026-11-27")
	rows, _ = csv.NewReader(resp.Body).ReadAll()
	resp.Body.Close()
	if len(rows) != 1 {
		t.Fatalf("another day's report: %v", rows)
	}
	if resp, _ := http.Get(srv.URL + "/settlement-report?date=28-11-2026"); resp.StatusCode != 400 {
		t.Fatalf("malformed date: %d", resp.StatusCode)
	}
}

func TestFaultsEndpoint(t *testing.T) {
	h, _ := openHost(t, t.TempDir())
	srv := httptest.NewServer(h.AdminHandler())
	defer srv.Close()
	for body, code := range map[string]int{
		`{"latency_ms":20,"drop_answers":0.5,"duplicate_answers":0.25,"down":false}`: 200,
		`{"drop_answers":1.5}`: 400,
		`{"latency_ms":-1}`:    400,
		`{"dropanswers":1}`:    400,
		`not json`:             400,
	} {
		resp, err := http.Post(srv.URL+"/faults", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("%s: %d, want %d", body, resp.StatusCode, code)
		}
	}
	if f := h.Faults(); f != (Faults{LatencyMS: 20, DropAnswers: 0.5, DuplicateAnswers: 0.25}) {
		t.Fatalf("faults %+v", f)
	}
}

// A crash in the middle of a ledger write leaves a torn last line, never
// acknowledged: the host starts and ignores it.
func TestTornLastLedgerLine(t *testing.T) {
	dir := t.TempDir()
	h, addr := openHost(t, dir)
	exchange(t, addr, financial("0100", "000000", "000001", "RRN000000001", acquirer.CardVisaApproved, 1000))
	h.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "ledger-2026-11-28.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":1,"kind":"au`)
	f.Close()
	h2, _ := openHost(t, dir)
	if h2.Authorizations("RRN000000001") != 1 {
		t.Fatal("the record before the torn line was lost")
	}
}

// A capture or refund of an amount ending in 9905 minor units is declined
// 05, the sandbox's deterministic movement decline; the authorisation it
// would capture stays whole, and a repeat gets the same decline.
func TestMovementDeclineAmount(t *testing.T) {
	h, addr := openHost(t, t.TempDir())
	ok := func(m *iso8583.Message, want string) {
		t.Helper()
		if a := exchange(t, addr, m); a.Value(39) != want {
			t.Fatalf("%s %s answered %s, want %s", m.MTI, m.Value(4), a.Dump(), want)
		}
	}
	ok(financial("0100", "000000", "000001", "AUTH00000001", acquirer.CardVisaApproved, 29905), "00")
	ok(advice("0220", "000002", "AUTH00000001", "0100", "000001", 19905), acquirer.RespDoNotHonour)
	ok(advice("0221", "000002", "AUTH00000001", "0100", "000001", 19905), acquirer.RespDoNotHonour)
	// Another capture of that authorisation (another movement: its own
	// STAN, here in the same second) is decided on its own, not answered
	// as a repeat of the declined one.
	ok(advice("0220", "000007", "AUTH00000001", "0100", "000001", 20000), "00")
	ok(financial("0200", "200000", "000003", "RFND00000001", acquirer.CardVisaApproved, 9905), acquirer.RespDoNotHonour)
	ok(financial("0200", "200000", "000004", "RFND00000002", acquirer.CardVisaApproved, 9904), "00")
	// The declined capture captured nothing: the whole amount is still there.
	ok(financial("0100", "000000", "000005", "AUTH00000002", acquirer.CardVisaApproved, 20000), "00")
	ok(advice("0220", "000006", "AUTH00000002", "0100", "000005", 20000), "00")
	var b strings.Builder
	if err := h.WriteReport(&b, "2026-11-28"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "\n"); got != 4 || !strings.Contains(b.String(), ",refund,9904,") ||
		!strings.Contains(b.String(), ",capture,20000,") {
		t.Fatalf("report: %s", b.String())
	}
	if !acquirer.DeclinesMove(19905) || acquirer.DeclinesMove(1990) || acquirer.DeclinesMove(99050) {
		t.Fatal("DeclinesMove")
	}
}

// Many requests in flight on one connection, written in one go before any
// answer is read: authorisations and echoes (answered on the connection's
// reader goroutine), sales and captures (each on its own goroutine, sharing
// fsyncs), repeats of an authorisation in the same burst. Every request
// gets exactly one answer, matched by its STAN, with its own decision; each
// repeat gets its first answer; each authorisation is decided once; and
// after a restart the ledger answers them all again as before.
func TestPipelinedRequestsOnOneConnection(t *testing.T) {
	dir := t.TempDir()
	h, addr := openHost(t, dir)
	type sent struct {
		m       *iso8583.Message
		mti     string // of the answer
		code    string // field 39 expected
		repeats string // the STAN whose answer it repeats, "" if none
	}
	var reqs []sent
	stan := 0
	next := func() string { stan++; return fmt.Sprintf("%06d", stan) }
	cards := []struct{ pan, code string }{{acquirer.CardVisaApproved, "00"}, {acquirer.CardDoNotHonour, "05"}, {acquirer.CardInsufficientFunds, "51"}}
	for i := range 60 {
		c := cards[i%len(cards)]
		s := next()
		reqs = append(reqs, sent{m: financial("0100", "000000", s, fmt.Sprintf("RRNA%08d", i), c.pan, 1000), mti: "0110", code: c.code})
		if i%10 == 0 { // its repeat, later in the same burst, with another STAN
			reqs = append(reqs, sent{m: financial("0100", "000000", next(), fmt.Sprintf("RRNA%08d", i), c.pan, 1000), mti: "0110", code: c.code, repeats: s})
		}
		if i%3 == 0 { // a capture of an approved one; its original goes out before it on the line
			reqs = append(reqs, sent{m: advice("0220", next(), fmt.Sprintf("RRNA%08d", i), "0100", s, 600), mti: "0230", code: "00"})
		}
		if i%4 == 0 {
			reqs = append(reqs, sent{m: financial("0200", "000000", next(), fmt.Sprintf("RRNS%08d", i), acquirer.CardVisaApproved, 700), mti: "0210", code: "00"})
		}
		if i%7 == 0 {
			reqs = append(reqs, sent{m: iso8583.New("0800").Set(iso8583.FieldTransmissionTime, "1128103000").
				Set(iso8583.FieldSTAN, next()).Set(iso8583.FieldNetworkManagement, "301"), mti: "0810", code: "00"})
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var burst []byte
	for _, r := range reqs {
		if burst, err = r.m.AppendFrame(burst); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := iso8583.NewFrameReader(c)
	answers := map[string]*iso8583.Message{}
	for range reqs {
		a, err := fr.Next(func(err error) { t.Errorf("malformed answer: %v", err) })
		if err != nil {
			t.Fatalf("%d answers of %d: %v", len(answers), len(reqs), err)
		}
		if answers[a.Value(11)] != nil {
			t.Fatalf("two answers for STAN %s", a.Value(11))
		}
		answers[a.Value(11)] = a
	}
	for _, r := range reqs {
		s := r.m.Value(11)
		a := answers[s]
		if a == nil || a.MTI != r.mti || a.Value(39) != r.code || a.Value(37) != r.m.Value(37) {
			t.Fatalf("request %s %s (RRN %s): answer %v, want %s with %s", r.m.MTI, s, r.m.Value(37), a, r.mti, r.code)
		}
		if r.repeats != "" {
			first := answers[r.repeats]
			if a.Value(38) != first.Value(38) || a.Value(48) != first.Value(48) {
				t.Fatalf("repeat %s: %s, want the first answer %s", s, a.Dump(), first.Dump())
			}
		}
	}
	if got, want := h.Total(), 60+15; got != want { // authorisations once each, and the sales
		t.Fatalf("decided %d authorisations and sales, want %d", got, want)
	}
	h.Close()
	h2, addr2 := openHost(t, dir)
	for _, r := range reqs[:12] {
		if r.m.MTI != "0100" && r.m.MTI != "0220" {
			continue
		}
		again := exchange(t, addr2, r.m)
		if first := answers[r.m.Value(11)]; again.Value(39) != first.Value(39) || again.Value(38) != first.Value(38) {
			t.Fatalf("after restart, %s %s: %s, want %s", r.m.MTI, r.m.Value(11), again.Dump(), first.Dump())
		}
	}
	if h2.Total() != 0 {
		t.Fatalf("the restarted host decided %d again", h2.Total())
	}
}

// A decided record keeps none of its request's frame: its fields are not
// substrings of it, so the frame (card number, CVV) is not kept alive in
// memory by the repeat index, and the request's message can be reused.
func TestRecordKeepsNoPartOfTheRequestFrame(t *testing.T) {
	h, _ := openHost(t, t.TempDir())
	packed, err := financial("0100", "000000", "000042", "RRN000000042", acquirer.CardVisaApproved, 1000).Pack()
	if err != nil {
		t.Fatal(err)
	}
	req, err := iso8583.Unpack(packed)
	if err != nil {
		t.Fatal(err)
	}
	// Unpack's values are substrings of one copy of the frame, which starts
	// with the MTI.
	start := uintptr(unsafe.Pointer(unsafe.StringData(req.MTI)))
	inFrame := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return len(s) > 0 && p >= start && p < start+uintptr(len(packed))
	}
	if !inFrame(req.Value(iso8583.FieldPAN)) {
		t.Fatal("the test's premise failed: the card number is not in the frame's copy")
	}
	r, err := h.decideOnce(KindAuth, req)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"mti": r.MTI, "mid": r.MID, "rrn": r.RRN, "stan": r.STAN, "sent": r.Sent,
		"currency": r.Currency, "date": r.Date, "auth_code": r.AuthCode, "arn": r.ARN} {
		if inFrame(v) {
			t.Errorf("record field %s (%q) is a substring of the request's frame", name, v)
		}
	}
	if r.MID != mid || r.RRN != "RRN000000042" || r.STAN != "000042" || r.Sent != "1128103000" || r.Currency != "840" || r.MTI != "0100" {
		t.Fatalf("record %+v does not hold the request's fields", r)
	}
}

// Captures and reversals wait only for those of their own authorisation.
// With the first movement's fsync held, a capture of another authorisation
// is decided and written all the same (it then shares the next fsync
// round), while a second capture of the held one waits: once the fsync
// goes, that second capture finds the first's amount taken and is refused
// 12, so two captures of one authorisation never both fit its amount. (One
// lock for every advice made each capture wait for the fsyncs of all
// those queued before it: ~36 ms a capture at 64 concurrent lifecycles.)
func TestAdvicesWaitOnlyForTheirOwnOriginal(t *testing.T) {
	var armed atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var holdOnce sync.Once
	h, addr := openHostWith(t, Config{DataDir: t.TempDir(), Now: func() time.Time { return testNow },
		syncFile: func(f *os.File) error {
			if armed.Load() {
				holdOnce.Do(func() { close(entered); <-release })
			}
			return f.Sync()
		}})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo) // before Close (cleanups run last first): a failed wait must not leave the round held
	for _, m := range []*iso8583.Message{
		financial("0100", "000000", "000001", "AUTH00000001", acquirer.CardVisaApproved, 1000),
		financial("0100", "000000", "000002", "AUTH00000002", acquirer.CardVisaApproved, 1000),
	} {
		if a := exchange(t, addr, m); a.Value(39) != "00" {
			t.Fatalf("authorisation: %s", a.Dump())
		}
	}
	written := func() uint64 {
		h.ledger.mu.Lock()
		defer h.ledger.mu.Unlock()
		return h.ledger.written
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10 s: %s", what)
			}
		}
	}
	send := func(m *iso8583.Message) <-chan string {
		code := make(chan string, 1)
		go func() {
			a, err := exchangeErr(addr, m)
			if err != nil {
				t.Error(err)
				code <- ""
				return
			}
			code <- a.Value(39)
		}()
		return code
	}

	armed.Store(true)
	first := send(advice("0220", "000011", "AUTH00000001", "0100", "000001", 600))
	<-entered // its fsync (or a round it waits behind) is held
	base := written()
	other := send(advice("0220", "000012", "AUTH00000002", "0100", "000002", 600))
	waitFor("the capture of the other authorisation is written while the first capture's fsync is held",
		func() bool { return written() > base })
	second := send(advice("0220", "000013", "AUTH00000001", "0100", "000001", 600))
	k, _ := recordFields(KindCapture, advice("0220", "000013", "AUTH00000001", "0100", "000001", 600))
	waitFor("the second capture of the held authorisation reaches its decision", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		_, deciding := h.inflight[k]
		return deciding
	})
	letGo()
	for name, c := range map[string]struct {
		got  <-chan string
		want string
	}{
		"first capture":                    {first, "00"},
		"capture of another authorisation": {other, "00"},
		"second capture, 600 more of 1000": {second, acquirer.RespInvalidTransaction},
	} {
		if got := <-c.got; got != c.want {
			t.Errorf("%s answered %q, want %q", name, got, c.want)
		}
	}
}

// exchangeErr is exchange returning its error, for goroutines other than
// the test's.
func exchangeErr(addr string, m *iso8583.Message) (*iso8583.Message, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	frame, err := m.AppendFrame(nil)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write(frame); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := iso8583.ReadFrame(c, nil)
	if err != nil {
		return nil, err
	}
	return iso8583.Unpack(b)
}
