package node_test

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// searchAnswer is the search's answer, orders kept raw to compare them
// with status's.
type searchAnswer struct {
	Orders     []json.RawMessage `json:"orders"`
	NextCursor *string           `json:"next_cursor"`
}

func (a *searchAnswer) ids(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, raw := range a.Orders {
		var o struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o.OrderID)
	}
	return out
}

func adminSearch(t *testing.T, n *nodetest.Node, q url.Values) searchAnswer {
	t.Helper()
	var a searchAnswer
	if code, err := n.Admin("GET", "/admin/v1/orders?"+q.Encode(), "", &a); code != 200 {
		t.Fatalf("search %v: %d %v", q, code, err)
	}
	return a
}

// Support finds a customer's payment by e-mail and by card, a merchant
// lists its own orders page by page, finance exports them: all through the
// real HTTP API of a running node.
func TestSearchEndToEnd(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	a, b := n.CreateMerchant(t, 1000), n.CreateMerchant(t, 1000)
	charge := func(m *nodetest.Merchant, id, card, email string) {
		body := chargeBody(id, card, 1500, 24)
		body["customer"] = map[string]any{"user_id": "u", "email": email, "ip_address": "203.0.113.7"}
		if r := m.Post(t, "charge", body); r.Status != 200 {
			t.Fatalf("charge %s: %d %s", id, r.Status, r.Body)
		}
	}
	charge(a, "a-1", "4111111111111111", "Jane@Example.com")
	charge(a, "a-2", "4000000000000002", "jane@example.com")
	charge(a, "a-3", "5555555555554444", "other@example.com")
	charge(b, "b-1", "4111111111111111", "jane@example.com")
	// Wait for the acquirer's answers (a-2 is declined), so that the
	// statuses the search sees stay put.
	for _, w := range []struct {
		m      *nodetest.Merchant
		id, st string
	}{{a, "a-1", "authorized"}, {a, "a-2", "declined"}, {a, "a-3", "authorized"}, {b, "b-1", "authorized"}} {
		deadline := time.Now().Add(20 * time.Second)
		for w.m.Post(t, "status", map[string]any{"order_id": w.id}).Str("status") != w.st {
			if time.Now().After(deadline) {
				t.Fatalf("%s never became %s", w.id, w.st)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("admin filters", func(t *testing.T) {
		for _, c := range []struct {
			q    url.Values
			want []string
		}{
			{url.Values{"email": {"JANE@example.com"}}, []string{"b-1", "a-2", "a-1"}},
			{url.Values{"email": {"jane@example.com"}, "merchant_id": {a.ID}}, []string{"a-2", "a-1"}},
			{url.Values{"card_last4": {"0002"}}, []string{"a-2"}},
			{url.Values{"bin": {"555555"}}, []string{"a-3"}},
			{url.Values{"status": {"declined"}}, []string{"a-2"}},
			{url.Values{"merchant_id": {a.ID}, "order_id_prefix": {"a-"}, "amount_min": {"1500"}, "amount_max": {"1500"}}, []string{"a-3", "a-2", "a-1"}},
			{url.Values{"merchant_id": {a.ID}, "amount_min": {"1501"}}, nil},
			{url.Values{"merchant_id": {b.ID}, "created_from": {time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, nil},
		} {
			if got := adminSearch(t, n, c.q); !slices.Equal(got.ids(t), c.want) {
				t.Errorf("%v: %v, want %v", c.q, got.ids(t), c.want)
			}
		}
		// The orders are exactly status's answers.
		got := adminSearch(t, n, url.Values{"card_last4": {"0002"}})
		status := a.Post(t, "status", map[string]any{"order_id": "a-2"})
		if len(got.Orders) != 1 || string(got.Orders[0]) != strings.TrimSpace(string(status.Body)) {
			t.Fatalf("search's order %s\nstatus's %s", got.Orders, status.Body)
		}
	})

	t.Run("bad parameters name themselves", func(t *testing.T) {
		for param, value := range map[string]string{"limit": "0", "created_from": "yesterday", "amount_min": "x",
			"status": "paid", "card_last4": "12", "bin": "41", "cursor": "bogus"} {
			code, err := n.Admin("GET", "/admin/v1/orders?"+param+"="+value, "", nil)
			if code != 422 || !strings.Contains(err.Error(), `"2.01"`) || !strings.Contains(err.Error(), `"`+param+`"`) {
				t.Errorf("%s=%s: %d %v", param, value, code, err)
			}
		}
	})

	t.Run("list-orders pages through the merchant's own orders", func(t *testing.T) {
		var got []string
		body := map[string]any{"limit": 1}
		for range 10 {
			r := a.Post(t, "list-orders", body)
			if r.Status != 200 {
				t.Fatalf("list-orders: %d %s", r.Status, r.Body)
			}
			var page searchAnswer
			if err := json.Unmarshal(r.Body, &page); err != nil {
				t.Fatal(err)
			}
			got = append(got, page.ids(t)...)
			if page.NextCursor == nil {
				break
			}
			body["cursor"] = *page.NextCursor
		}
		if !slices.Equal(got, []string{"a-3", "a-2", "a-1"}) {
			t.Fatalf("a's pages: %v", got)
		}
		// B's cursor, and a merchant_id of A's, show B nothing of A's.
		first := b.Post(t, "list-orders", map[string]any{"limit": 1, "email": "jane@example.com"})
		var bPage searchAnswer
		if err := json.Unmarshal(first.Body, &bPage); err != nil || !slices.Equal(bPage.ids(t), []string{"b-1"}) {
			t.Fatalf("b's search: %s", first.Body)
		}
		aCursor := a.Post(t, "list-orders", map[string]any{"limit": 1}).Str("next_cursor")
		expectError(t, b.Post(t, "list-orders", map[string]any{"cursor": aCursor}), 422, "2.01", "cursor")
		expectError(t, b.Post(t, "list-orders", map[string]any{"merchant_id": a.ID}), 422, "2.01", "merchant_id")
		expectError(t, b.Post(t, "list-orders", map[string]any{"limit": 1001}), 422, "2.01", "limit")
	})

	t.Run("csv export, one row per transaction", func(t *testing.T) {
		req, _ := http.NewRequest("GET", n.URL()+"/admin/v1/orders.csv?merchant_id="+a.ID, nil)
		req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		rows, err := csv.NewReader(strings.NewReader(string(data))).ReadAll()
		if resp.StatusCode != 200 || err != nil || len(rows) < 4 {
			t.Fatalf("csv: %d %v\n%s", resp.StatusCode, err, data)
		}
		if rows[0][0] != "merchant_id" || rows[0][1] != "order_id" {
			t.Fatalf("header %v", rows[0])
		}
		var ids []string
		for _, row := range rows[1:] {
			if row[0] != a.ID {
				t.Fatalf("another merchant's row: %v", row)
			}
			if strings.Contains(strings.Join(row, ","), "4111111111111111") {
				t.Fatalf("a full card number in the export: %v", row)
			}
			ids = append(ids, row[1]+"/"+row[11])
		}
		if !slices.Equal(ids, []string{"a-3/auth", "a-2/auth", "a-1/auth"}) {
			t.Fatalf("rows: %v", ids)
		}
	})
}
