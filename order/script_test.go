package order_test

// A small datadriven-style runner (after pebble's datadriven.RunTest) for the
// order lifecycle. Each testdata/*.txt file is a transcript:
//
//	# comment
//	<command> [key=value | word]...
//	----
//	<expected output, ended by a blank line or the end of the file>
//
// Commands (one order per file, until reset):
//
//	create amount=N delay=H (-1: order.SettleManually) [currency=USD] [hash=h1] [source=card] [3ds] [force] [attempt-non-secure]
//	init amount=N delay=H [currency=USD] [hash=h1] [ttl=30m] [lang=de] [force] [attempt-non-secure]
//	submit                  the customer's card on the form (created -> processing)
//	challenge [id=c1] [ttl=10m] [txn=tN]
//	3ds-result authenticated|failed|timed-out [id=c1] [txn=tN]
//	non-secure [txn=tN]     issuer not enrolled: go on without 3-D Secure
//	expire                  the form's lifetime ends
//	outcome approved [auth_code=A1] [avs=Y] [cvv=M] [risk=R] [txn=tN] [no-auto-settle]
//	outcome declined code=N.NN [txn=tN]
//	settle [amount=N] | settle auto [amount=N]
//	void [amount=N]
//	refund amount=N [reason=NNNN]
//	advance by=DURATION     move the clock (the auto-settle delay ending)
//	view [txn=tN]           the merchant view as indented JSON (all transactions without txn=)
//	reset                   forget the order; clock and ids start again
//
// The clock starts at 2025-01-01 00:00:00 UTC and advances one second after
// every command given to Apply. Transaction ids are t1, t2, ... in the order
// Apply accepts them. Like the leader (actors.orderActor), an approved card
// authorisation carries a payment token and, when settle.delay_hours > 0, an
// auto-settle time of now + delay_hours.
//
// go test ./order/ -run TestScripts -rewrite regenerates the expected blocks;
// read the diff against contract section 4 before keeping it.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of testdata/*.txt")

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []string // the file as it would be rewritten
	s := &script{t: t, now: fxEpoch}
	for i := 0; i < len(lines); {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			out = append(out, lines[i])
			i++
			continue
		}
		pos := fmt.Sprintf("%s:%d", path, i+1)
		i++
		var want []string
		if i < len(lines) && lines[i] == "----" {
			for i++; i < len(lines) && lines[i] != ""; i++ {
				want = append(want, lines[i])
			}
		} else if !*rewrite {
			t.Fatalf("%s: %q is not followed by ----", pos, line)
		}
		got := s.run(pos, line)
		out = append(append(out, line, "----"), got)
		if !*rewrite && got != strings.Join(want, "\n") {
			t.Errorf("%s: %s\nwant:\n%s\ngot:\n%s", pos, line, strings.Join(want, "\n"), got)
		}
	}
	if *rewrite {
		text := strings.Join(out, "\n")
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// script is the state of one transcript.
type script struct {
	t    *testing.T
	cur  *order.Order
	now  int64
	txns int // transaction ids accepted so far
}

// args holds a command's key=value pairs and bare words; every one must be used.
type args struct {
	pos  string
	vals map[string]string
	used map[string]bool
}

func (a *args) str(key, def string) string {
	a.used[key] = true
	if v, ok := a.vals[key]; ok {
		return v
	}
	return def
}

func (a *args) has(word string) bool {
	a.used[word] = true
	_, ok := a.vals[word]
	return ok
}

func (a *args) int(t *testing.T, key string, def int64) int64 {
	v := a.str(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", a.pos, key, v, err)
	}
	return n
}

var declineMessages = map[string]string{ // contract section 3, decline codes
	"2.06": "invalid CVV", "2.09": "card expired", "3.02": "insufficient funds", "3.08": "do not honour",
	"4.01": "blocked by risk rules", "5.01": "3-D Secure authentication failed", "6.02": "acquirer unreachable",
}

func (s *script) run(pos, line string) string {
	t := s.t
	fields := strings.Fields(line)
	a := &args{pos: pos, vals: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a.vals[k] = v
	}
	defer func() {
		for k := range a.vals {
			if !a.used[k] {
				t.Fatalf("%s: unknown argument %q", pos, k)
			}
		}
	}()
	nextID := fmt.Sprintf("t%d", s.txns+1)
	cmd := &order.Command{Time: s.now, Merchant: "m1", OrderID: "o1", TxnID: nextID, ARN: "arn-" + nextID}
	switch fields[0] {
	case "create":
		cmd.Kind, cmd.ARN, cmd.RequestHash = order.KindCreate, "", a.str("hash", "h1")
		c := &order.CreateData{Amount: a.int(t, "amount", 0), Currency: a.str("currency", "USD"),
			ProcessingMID: "mid1", SettleDelayHours: a.int(t, "delay", 0),
			Source: order.PaymentSource{Type: a.str("source", "card"), Brand: "visa", Masked: "411111******1111"}}
		if a.has("3ds") {
			c.ThreeDS = &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "cavv1"}
		}
		c.ThreeDSForce, c.AttemptNonSecure = a.has("force"), a.has("attempt-non-secure")
		cmd.Create = c
	case "outcome":
		cmd.Kind, cmd.ARN = order.KindAuthOutcome, ""
		cmd.TxnID = "t1"
		if s.cur != nil && s.cur.Pending != nil {
			cmd.TxnID = s.cur.Pending.TxnID
		}
		cmd.TxnID = a.str("txn", cmd.TxnID)
		r := &order.OutcomeData{}
		switch {
		case a.has("approved"):
			r.Approved, r.AuthCode = true, a.str("auth_code", "A1")
			r.AVSCheck, r.CVVCheck, r.RiskDecision = a.str("avs", ""), a.str("cvv", ""), a.str("risk", "")
			cmd.ARN = "arn-" + cmd.TxnID
			if s.cur != nil && s.cur.Source.Type == "card" {
				r.PaymentToken, r.TokenExpiresAt = "tok-"+cmd.TxnID, s.now+int64(365*24*time.Hour)
			}
			if noAuto := a.has("no-auto-settle"); s.cur != nil && s.cur.SettleDelayHours > 0 && !noAuto {
				r.AutoSettleAt = s.now + s.cur.SettleDelayHours*int64(time.Hour)
			}
		case a.has("declined"):
			r.DeclineCode = a.str("code", "3.08")
			r.DeclineMessage = declineMessages[r.DeclineCode]
			r.AVSCheck, r.CVVCheck, r.RiskDecision = a.str("avs", ""), a.str("cvv", ""), a.str("risk", "")
		default:
			t.Fatalf("%s: outcome needs approved or declined", pos)
		}
		cmd.Outcome = r
	case "settle":
		cmd.Kind, cmd.Auto, cmd.Amount = order.KindSettle, a.has("auto"), a.int(t, "amount", 0)
	case "void":
		cmd.Kind, cmd.Amount = order.KindVoid, a.int(t, "amount", 0)
	case "refund":
		cmd.Kind, cmd.Amount, cmd.RefundReasonCode = order.KindRefund, a.int(t, "amount", 0), a.str("reason", "")
	case "advance":
		d, err := time.ParseDuration(a.str("by", ""))
		if err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		s.now += int64(d)
		return "now=" + order.FormatTime(s.now)
	case "view":
		if s.cur == nil {
			return "no order"
		}
		v := order.NewView(s.cur, order.WithAllTxns, "")
		if id := a.str("txn", ""); id != "" {
			v = order.NewView(s.cur, order.WithTxn, id)
		}
		var b bytes.Buffer
		if err := json.Indent(&b, v.Marshal(), "", "  "); err != nil {
			t.Fatalf("%s: %v", pos, err)
		}
		return b.String()
	case "reset":
		s.cur, s.now, s.txns = nil, fxEpoch, 0
		return "ok"
	default:
		if !s.formCommand(fields[0], a, cmd) {
			t.Fatalf("%s: unknown command %q", pos, fields[0])
		}
	}
	return s.apply(pos, cmd)
}

// apply runs cmd through Apply, checks what every step must keep (the input
// is untouched, a refusal returns it as it was, a change bumps the version by
// one) and renders the result.
func (s *script) apply(pos string, cmd *order.Command) string {
	before := s.cur.Clone()
	next, out := order.Apply(s.cur, cmd)
	s.now += fxSecond
	if !reflect.DeepEqual(before, s.cur) {
		s.t.Errorf("%s: Apply mutated its input", pos)
	}
	if !out.Changed() {
		if next != s.cur {
			s.t.Errorf("%s: a refusal or replay returned a new order", pos)
		}
		if out.Reject != nil {
			return fmt.Sprintf("reject %s %s: %s", rejectCode(out.Reject.Kind), out.Reject.Attribute, out.Reject.Message)
		}
		return fmt.Sprintf("replay txn=%s\n%s", out.TxnID, renderOrder(next))
	}
	if next == s.cur {
		s.t.Errorf("%s: a change returned the input order", pos)
	}
	if want := version(s.cur) + 1; next.Version != want {
		s.t.Errorf("%s: version %d, want %d", pos, next.Version, want)
	}
	if createsTxn(cmd.Kind) {
		s.txns++
	}
	s.cur = next
	result := "changed"
	switch {
	case out.Created:
		result = "created"
	case out.StatusChanged:
		result = "status-changed"
	case out.RedirectSet:
		result = "redirect-set"
	}
	return fmt.Sprintf("%s txn=%s\n%s", result, out.TxnID, renderOrder(next))
}

func version(o *order.Order) uint64 {
	if o == nil {
		return 0
	}
	return o.Version
}

// rejectCode maps a rejection to its contract section 3 code.
func rejectCode(k order.RejectKind) string {
	switch k {
	case order.RejectIllegalStatus:
		return "0.03"
	case order.RejectAmount:
		return "2.02"
	case order.RejectConflict:
		return "5.06"
	case order.RejectNotFound:
		return "2.05"
	}
	return fmt.Sprintf("kind-%d", k)
}

// renderOrder is the compact, deterministic form of an order: the core line,
// then only the optional parts that are set, then one line per transaction.
func renderOrder(o *order.Order) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s amount=%d settled=%d refunded=%d version=%d",
		o.Status, o.Amount, o.SettledAmount, o.RefundedAmount, o.Version)
	renderForm(&b, o)
	if o.Decline != nil {
		fmt.Fprintf(&b, "\ndecline=%s %s", o.Decline.Code, o.Decline.Message)
	}
	if o.AutoSettleAt != 0 {
		fmt.Fprintf(&b, "\nauto_settle_at=%s", order.FormatTime(o.AutoSettleAt))
	}
	if o.Pending != nil {
		fmt.Fprintf(&b, "\npending=%s", o.Pending.TxnID)
		renderChallenge(&b, o.Pending)
		if o.Pending.ThreeDS != nil {
			fmt.Fprintf(&b, " three_ds.eci=%s", o.Pending.ThreeDS.ECI)
		}
	}
	if o.AVSCheck != "" || o.CVVCheck != "" || o.RiskDecision != "" {
		fmt.Fprintf(&b, "\navs=%q cvv=%q risk=%q", o.AVSCheck, o.CVVCheck, o.RiskDecision)
	}
	if o.Source.PaymentToken != "" {
		fmt.Fprintf(&b, "\ntoken=%s expires=%s", o.Source.PaymentToken, order.FormatTime(o.Source.TokenExpiresAt))
	}
	for _, x := range o.Txns {
		fmt.Fprintf(&b, "\n- %s:%s:%s:%d", x.ID, x.Operation, x.Status, x.Amount)
		for _, kv := range [][2]string{{"auth_code", x.AuthCode}, {"arn", x.ARN}, {"reason", x.RefundReasonCode}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
			}
		}
	}
	return b.String()
}
