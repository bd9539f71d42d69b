package order_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
)

// fields decodes a view into its top-level members, raw.
func fields(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("view is not a JSON object: %v\n%s", err, b)
	}
	return m
}

func fixture(t *testing.T, name string) *order.Order {
	t.Helper()
	for _, fx := range fxOrders() {
		if fx.name == name {
			return fx.order()
		}
	}
	t.Fatalf("no fixture %q", name)
	return nil
}

// TestViewChecksNullUntilKnown: avs_check and cvv_check are present as null
// until the acquirer reports them (interface 2.1), then strings.
func TestViewChecksNullUntilKnown(t *testing.T) {
	for _, tc := range []struct {
		name, avs, cvv   string
		wantAVS, wantCVV string
	}{
		{"processing", "", "", "null", "null"},
		{"authorized", "Y", "M", `"Y"`, `"M"`},
		{"authorized", "N", "", `"N"`, "null"},
		{"declined", "", "N", "null", `"N"`},
	} {
		o := fixture(t, tc.name)
		o.AVSCheck, o.CVVCheck = tc.avs, tc.cvv
		for _, shape := range []order.Shape{order.WithTxn, order.WithAllTxns} {
			m := fields(t, order.NewView(o, shape, "t1").Marshal())
			avs, okA := m["avs_check"]
			cvv, okC := m["cvv_check"]
			if !okA || !okC || string(avs) != tc.wantAVS || string(cvv) != tc.wantCVV {
				t.Errorf("%s avs=%q cvv=%q: avs_check=%s (present %v) cvv_check=%s (present %v), want %s and %s",
					tc.name, tc.avs, tc.cvv, avs, okA, cvv, okC, tc.wantAVS, tc.wantCVV)
			}
		}
	}
}

// TestViewTransactions: status and notifications carry the map of every
// transaction keyed by its id; an operation's answer carries the one it
// acted on.
func TestViewTransactions(t *testing.T) {
	o := fixture(t, "refunded") // t1 auth, t2 settle, t3 refund
	m := fields(t, order.NewView(o, order.WithAllTxns, "").Marshal())
	if _, ok := m["transaction"]; ok {
		t.Errorf("WithAllTxns carries a single transaction")
	}
	var txns map[string]order.TxnView
	if err := json.Unmarshal(m["transactions"], &txns); err != nil {
		t.Fatalf("transactions: %v", err)
	}
	if len(txns) != len(o.Txns) {
		t.Fatalf("transactions has %d entries, want %d: %s", len(txns), len(o.Txns), m["transactions"])
	}
	for _, x := range o.Txns {
		v, ok := txns[x.ID]
		if !ok || v.ID != x.ID || v.Operation != x.Operation || v.Status != x.Status || v.Amount != x.Amount ||
			v.RefundReasonCode != x.RefundReasonCode {
			t.Errorf("transactions[%q] = %+v, want %+v", x.ID, v, x)
		}
	}

	for _, x := range o.Txns {
		m := fields(t, order.NewView(o, order.WithTxn, x.ID).Marshal())
		if _, ok := m["transactions"]; ok {
			t.Errorf("WithTxn carries the transactions map")
		}
		var v order.TxnView
		if err := json.Unmarshal(m["transaction"], &v); err != nil || v.ID != x.ID || v.Operation != x.Operation {
			t.Errorf("WithTxn %s: transaction %s (%v)", x.ID, m["transaction"], err)
		}
	}
	m = fields(t, order.NewView(o, order.WithTxn, "t404").Marshal())
	if _, ok := m["transaction"]; ok {
		t.Errorf("WithTxn of an unknown id carries a transaction: %s", m["transaction"])
	}
}

// TestViewMarshalDeterministic: the bytes of a view are the same on every
// call and on every replica (notification bodies are compared across nodes),
// whatever the order of map iteration.
func TestViewMarshalDeterministic(t *testing.T) {
	o := fixture(t, "settled")
	o.Txns = o.Txns[:1]
	for _, n := range []int{7, 12, 3, 10, 2, 11, 5, 9, 4, 8, 6} {
		x := fxTxn(fmt.Sprintf("t%d", n), order.OpRefund, order.TxnSuccess, 1, fxEpoch+int64(n)*fxSecond)
		o.Txns = append(o.Txns, x)
	}
	want := order.NewView(o, order.WithAllTxns, "").Marshal()
	for i := range 200 {
		if got := order.NewView(o.Clone(), order.WithAllTxns, "").Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("call %d differs:\n%s\n%s", i, want, got)
		}
	}
	v := order.NewView(o, order.WithAllTxns, "")
	if !bytes.Equal(v.Marshal(), v.Marshal()) {
		t.Fatalf("the same view marshals differently")
	}

	// Keys of the transactions map come out sorted.
	dec := json.NewDecoder(bytes.NewReader(fields(t, want)["transactions"]))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' {
				depth++
			} else if tok == '}' {
				depth--
			}
		case string:
			if depth == 1 {
				keys = append(keys, tok)
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if len(keys) != len(o.Txns) || !slices.IsSorted(keys) {
		t.Errorf("transactions keys %v: want all %d, sorted", keys, len(o.Txns))
	}

	// The top-level members come out in one fixed order.
	wantOrder := []string{`"order_id"`, `"amount"`, `"currency"`, `"refunded_amount"`, `"settled_amount"`,
		`"status"`, `"avs_check"`, `"cvv_check"`, `"transactions"`, `"payment_source"`}
	last := -1
	for _, k := range wantOrder {
		i := bytes.Index(want, []byte(k+":"))
		if i <= last {
			t.Errorf("member %s at %d, after the previous one at %d:\n%s", k, i, last, want)
		}
		last = i
	}
}

var dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$`)

// TestViewDates: every date is YYYY-MM-DD HH:MM:SS in UTC, whatever the
// local time zone of the node.
func TestViewDates(t *testing.T) {
	saved := time.Local
	time.Local = time.FixedZone("UTC+05:30", 5*3600+1800)
	t.Cleanup(func() { time.Local = saved })

	at := time.Date(2025, 3, 4, 23, 59, 58, 987654321, time.UTC).UnixNano()
	if got, want := order.FormatTime(at), "2025-03-04 23:59:58"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
	o := fixture(t, "authorized")
	o.Txns[0].CreatedAt, o.Txns[0].UpdatedAt = at, at+2*fxSecond
	o.Source.TokenExpiresAt = time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC).UnixNano()

	m := fields(t, order.NewView(o, order.WithAllTxns, "").Marshal())
	var txns map[string]map[string]any
	if err := json.Unmarshal(m["transactions"], &txns); err != nil {
		t.Fatal(err)
	}
	var src map[string]any
	if err := json.Unmarshal(m["payment_source"], &src); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  any
		want string
	}{
		{"created_at", txns["t1"]["created_at"], "2025-03-04 23:59:58"},
		{"updated_at", txns["t1"]["updated_at"], "2025-03-05 00:00:00"},
		{"token_expiration_date", src["token_expiration_date"], "2026-12-31 23:00:00"},
	} {
		s, _ := c.got.(string)
		if s != c.want || !dateRE.MatchString(s) {
			t.Errorf("%s = %v, want %q", c.name, c.got, c.want)
		}
	}
	// No other member looks like a date in another format.
	if strings.Contains(string(order.NewView(o, order.WithAllTxns, "").Marshal()), "+05") {
		t.Errorf("a date carries the local zone")
	}
}

// TestViewAbsentWhenNotApplicable: decline, risk, three_ds, redirect_url and
// payment-source details are absent when they do not apply (interface 2.1).
func TestViewAbsentWhenNotApplicable(t *testing.T) {
	o := fixture(t, "processing")
	o.ThreeDS, o.Source = nil, order.PaymentSource{}
	m := fields(t, order.NewView(o, order.WithAllTxns, "").Marshal())
	for _, k := range []string{"decline", "risk", "three_ds", "redirect_url", "payment_source",
		"subscription_id", "transaction"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s present: %s", k, v)
		}
	}
	d := fixture(t, "declined")
	d.RiskDecision = "deny"
	m = fields(t, order.NewView(d, order.WithAllTxns, "").Marshal())
	if string(m["decline"]) != `{"code":"3.02","message":"insufficient funds"}` || string(m["risk"]) != `{"decision":"deny"}` {
		t.Errorf("declined: decline %s risk %s", m["decline"], m["risk"])
	}
}
