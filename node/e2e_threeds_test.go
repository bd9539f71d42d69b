package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// Every 3-D Secure path of an API charge (contract section 7, interface
// 4.3), through HTTP: the gateway's own challenge (issuer enrolled, or
// three_ds.force), the issuer page's two answers, the not-enrolled card with
// and without attempt_non_secure, and external MPI data with each of its
// rules.

func threeDSCharge(orderID, card string, force, attempt *bool, mpi map[string]any) map[string]any {
	b := chargeBody(orderID, card, 1500, 24)
	td := map[string]any{}
	if force != nil {
		td["force"] = *force
	}
	if attempt != nil {
		td["attempt_non_secure"] = *attempt
	}
	if mpi != nil {
		td["mpi_data"] = mpi
	}
	if len(td) > 0 {
		b["three_ds"] = td
	}
	return b
}

var yes, no = func() *bool { v := true; return &v }(), func() *bool { v := false; return &v }()

func TestThreeDSChallenge(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)

	for _, c := range []struct {
		name, card, outcome string
		force               *bool
		delay               int
		status, decline     string
	}{
		{"enrolled card, authenticated", "4000000000003220", "success", nil, 24, "authorized", ""},
		{"enrolled card, not authenticated", "4000000000003220", "failure", nil, 24, "declined", "5.01"},
		{"force on an ordinary card, authenticated", "4111111111111111", "success", yes, 24, "authorized", ""},
		{"force on an ordinary card, not authenticated", "5555555555554444", "failure", yes, 24, "declined", "5.01"},
		{"enrolled card, sale", "4000000000003220", "success", no, 0, "settled", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			hooks := newReceiver(t)
			id := newOrderID("3ds")
			body := threeDSCharge(id, c.card, c.force, nil, nil)
			body["settle"] = map[string]any{"delay_hours": c.delay}
			body["callback_url"] = hooks.URL()
			r := m.Post(t, "charge", body)
			redirect := r.Str("redirect_url")
			if r.Status != 200 || r.Str("status") != "processing" || r.Str("transaction.status") != "verify" ||
				!strings.HasPrefix(redirect, n.URL()+"/api/v3/3ds/") || len(redirect) < len(n.URL())+len("/api/v3/3ds/")+40 {
				t.Fatalf("charge: %d %s", r.Status, r.Body)
			}
			// The redirect_url notification (interface 6.1.2), before any status change.
			first := jsonMap(t, hooks.waitCalls(1, 10*time.Second)[0].body)
			if first["status"] != "processing" || first["redirect_url"] != redirect {
				t.Fatalf("first notification: %v", first)
			}
			// The issuer page: two submit buttons named outcome.
			st, h, page := httpDo(t, "GET", redirect, "", "")
			if st != 200 || !strings.Contains(string(page), `name="outcome" value="success"`) ||
				!strings.Contains(string(page), `name="outcome" value="failure"`) || h.Get("Content-Security-Policy") == "" {
				t.Fatalf("issuer page: %d\n%s", st, page)
			}
			time.Sleep(50 * time.Millisecond)
			if s := m.Post(t, "status", map[string]any{"order_id": id}); s.Str("status") != "processing" {
				t.Fatalf("moved without the customer: %s", s.Body)
			}
			answerChallenge(t, redirect, c.outcome)
			o := m.WaitStatus(t, id, c.status, 10*time.Second)
			td, _ := o.Get("three_ds").(map[string]any)
			if c.decline != "" {
				if o.Str("decline.code") != c.decline || td["authentication_result"] != "N" || onlyTxn(t, o)["status"] != "fail" {
					t.Fatalf("not authenticated: %s", o.Body)
				}
			} else if td["authentication_result"] != "Y" || td["version"] != "2.2.0" || td["eci"] == nil ||
				td["cavv"] == nil || td["xid"] == nil || onlyTxn(t, o)["status"] != "success" {
				t.Fatalf("authenticated: %s", o.Body)
			}
			// A second answer changes nothing; the page now sends to the result.
			answerChallenge(t, redirect, "failure")
			if st, h, _ := httpDo(t, "GET", redirect, "", ""); st != 303 || !strings.HasSuffix(h.Get("Location"), "/result") {
				t.Fatalf("answered challenge page: %d %v", st, h)
			}
			if s := m.Post(t, "status", map[string]any{"order_id": id}); s.Str("status") != c.status {
				t.Fatalf("second answer moved the order: %s", s.Body)
			}
		})
	}

	t.Run("token payment of an enrolled card", func(t *testing.T) {
		src := newOrderID("3ds-src")
		m.Post(t, "charge", chargeBody(src, "4000000000003220", 100, 24))
		redirect := m.Post(t, "status", map[string]any{"order_id": src}).Str("redirect_url")
		answerChallenge(t, redirect, "success")
		tok := m.WaitStatus(t, src, "authorized", 10*time.Second).Str("payment_source.payment_token")
		id := newOrderID("3ds-tok")
		body := chargeBody(id, "", 250, 24)
		body["payment_source"] = map[string]any{"type": "token", "payment_token": tok}
		r := m.Post(t, "charge", body)
		if r.Str("transaction.status") != "verify" || r.Str("redirect_url") == "" {
			t.Fatalf("token payment of an enrolled card must authenticate: %s", r.Body)
		}
		answerChallenge(t, r.Str("redirect_url"), "success")
		m.WaitStatus(t, id, "authorized", 10*time.Second)
	})
}

func TestThreeDSNotEnrolled(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	for _, c := range []struct {
		name           string
		force, attempt *bool
		status         string
	}{
		{"no three_ds", nil, nil, "declined"},
		{"force only", yes, nil, "declined"},
		{"attempt_non_secure only", nil, yes, "declined"},
		{"force, attempt_non_secure false", yes, no, "declined"},
		{"force and attempt_non_secure", yes, yes, "authorized"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := newOrderID("n3ds")
			r := m.Post(t, "charge", threeDSCharge(id, "4000000000003063", c.force, c.attempt, nil))
			if r.Status != 200 || r.Str("redirect_url") != "" {
				t.Fatalf("charge: %s", r.Body)
			}
			o := m.WaitStatus(t, id, c.status, 10*time.Second)
			if c.status == "declined" {
				if o.Str("decline.code") != "5.01" || o.Get("three_ds") != nil {
					t.Fatalf("3-D Secure required and impossible: %s", o.Body)
				}
				return
			}
			if o.Str("three_ds.enrolled") != "N" || o.Str("three_ds.authentication_result") != "" {
				t.Fatalf("non-secure downgrade: %s", o.Body)
			}
		})
	}
	// An external authentication result claimed for a card whose issuer
	// cannot authenticate does not stand: only the downgrade above does.
	t.Run("mpi_data without force and attempt_non_secure", func(t *testing.T) {
		id := newOrderID("n3ds-mpi")
		m.Post(t, "charge", threeDSCharge(id, "4000000000003063", nil, nil,
			map[string]any{"cavv": "AAABBEg0VhI0VniQEjRWAAAAAAA=", "eci": "05", "version": "2.2.0"}))
		if o := m.WaitStatus(t, id, "declined", 10*time.Second); o.Str("decline.code") != "5.01" {
			t.Fatalf("not enrolled with mpi_data: %s", o.Body)
		}
	})
}

func TestThreeDSExternalMPI(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	const cavv = "AAABBEg0VhI0VniQEjRWAAAAAAA="
	mpi := func(kv ...string) map[string]any {
		out := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	t.Run("accepted", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			card    string
			force   *bool
			mpi     map[string]any
			version string
		}{
			{"version defaults to 1.0.0", "4000000000003220", nil, mpi("cavv", cavv, "eci", "05", "xid", "MDAwMDAwMDAwMDAwMDAwMDAwMDE="), "1.0.0"},
			{"1.0.2 with xid", "4000000000003220", nil, mpi("cavv", cavv, "eci", "5", "xid", "x1", "version", "1.0.2"), "1.0.2"},
			{"2.x visa needs no xid", "4000000000003220", nil, mpi("cavv", cavv, "eci", "05", "version", "2.2.0", "ds_transaction_id", "f25084f0-5b16-4c0a-ae5d-b24808a95e4b"), "2.2.0"},
			{"2.x mastercard with xid", "5555555555554444", nil, mpi("cavv", cavv, "eci", "02", "version", "2.1.0", "xid", "x2"), "2.1.0"},
			{"force is satisfied by mpi_data", "4111111111111111", yes, mpi("cavv", cavv, "eci", "05", "version", "2.2.0"), "2.2.0"},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := newOrderID("mpi")
				r := m.Post(t, "charge", threeDSCharge(id, c.card, c.force, nil, c.mpi))
				if r.Status != 200 || r.Str("redirect_url") != "" || r.Str("transaction.status") != "created" {
					t.Fatalf("charge with mpi_data: %d %s", r.Status, r.Body)
				}
				o := m.WaitStatus(t, id, "authorized", 10*time.Second)
				if o.Str("three_ds.version") != c.version || o.Str("three_ds.cavv") != cavv ||
					o.Str("three_ds.eci") != c.mpi["eci"] || o.Str("three_ds.authentication_result") != "Y" {
					t.Fatalf("three_ds from mpi_data: %s", o.Body)
				}
				if x, ok := c.mpi["xid"]; ok && o.Str("three_ds.xid") != x {
					t.Fatalf("xid: %s", o.Body)
				}
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		long := strings.Repeat("A", 52)
		for _, c := range []struct {
			name, card string
			mpi        map[string]any
			attr       string
		}{
			{"cavv required", "4111111111111111", mpi("eci", "05", "xid", "x"), "three_ds.mpi_data.cavv"},
			{"cavv base64", "4111111111111111", mpi("cavv", "not base64!", "eci", "05", "xid", "x"), "three_ds.mpi_data.cavv"},
			{"cavv at most 50", "4111111111111111", mpi("cavv", long, "eci", "05", "xid", "x"), "three_ds.mpi_data.cavv"},
			{"eci required", "4111111111111111", mpi("cavv", cavv, "xid", "x"), "three_ds.mpi_data.eci"},
			{"eci digits", "4111111111111111", mpi("cavv", cavv, "eci", "5a", "xid", "x"), "three_ds.mpi_data.eci"},
			{"eci at most 2", "4111111111111111", mpi("cavv", cavv, "eci", "005", "xid", "x"), "three_ds.mpi_data.eci"},
			{"version format", "4111111111111111", mpi("cavv", cavv, "eci", "05", "xid", "x", "version", "3.0.0"), "three_ds.mpi_data.version"},
			{"version at most 10", "4111111111111111", mpi("cavv", cavv, "eci", "05", "xid", "x", "version", "2.2.0.1.1.1"), "three_ds.mpi_data.version"},
			{"xid required with the default 1.0.0", "4111111111111111", mpi("cavv", cavv, "eci", "05"), "three_ds.mpi_data.xid"},
			{"xid required with 1.x", "4111111111111111", mpi("cavv", cavv, "eci", "05", "version", "1.0.2"), "three_ds.mpi_data.xid"},
			{"xid required with 2.x and a mastercard", "5555555555554444", mpi("cavv", cavv, "eci", "02", "version", "2.2.0"), "three_ds.mpi_data.xid"},
			{"xid at most 50", "4111111111111111", mpi("cavv", cavv, "eci", "05", "xid", long), "three_ds.mpi_data.xid"},
			{"ds_transaction_id at most 50", "4111111111111111", mpi("cavv", cavv, "eci", "05", "xid", "x", "ds_transaction_id", long), "three_ds.mpi_data.ds_transaction_id"},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := newOrderID("mpi-bad")
				expectError(t, m.Post(t, "charge", threeDSCharge(id, c.card, nil, nil, c.mpi)), 422, "2.01", c.attr)
				expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")
			})
		}
	})

	// A token's brand is known once the token resolves: the Mastercard rule
	// for 3-D Secure 2.x applies then, with the card charge's answer.
	t.Run("xid with a token's card", func(t *testing.T) {
		twoX := mpi("cavv", cavv, "eci", "02", "version", "2.1.0")
		card := m.Post(t, "charge", threeDSCharge(newOrderID("mpi-mc"), "5555555555554444", nil, nil, twoX))
		expectError(t, card, 422, "2.01", "three_ds.mpi_data.xid")

		mastercard := tokenOf(t, m, "5555555555554444", "Ogdenville")
		id := newOrderID("mpi-tok")
		body := tokenCharge(id, mastercard, nil)
		body["three_ds"] = map[string]any{"mpi_data": twoX}
		r := m.Post(t, "charge", body)
		expectError(t, r, 422, "2.01", "three_ds.mpi_data.xid")
		if got, want := messages(r, "three_ds.mpi_data.xid"), messages(card, "three_ds.mpi_data.xid"); len(got) != 1 || got[0] != want[0] {
			t.Fatalf("token charge %v, want the card charge's message %v", got, want)
		}
		expectError(t, m.Post(t, "status", map[string]any{"order_id": id}), 404, "2.05", "order_id")

		// With the xid, or with a Visa token, the same mpi_data is accepted.
		body["order_id"] = newOrderID("mpi-tok")
		body["three_ds"] = map[string]any{"mpi_data": mpi("cavv", cavv, "eci", "02", "version", "2.1.0", "xid", "x3")}
		if r := m.Post(t, "charge", body); r.Status != 200 {
			t.Fatalf("mastercard token with xid: %s", r.Body)
		}
		visa := tokenCharge(newOrderID("mpi-tok"), tokenOf(t, m, "4111111111111111", "Ogdenville"), nil)
		visa["three_ds"] = map[string]any{"mpi_data": twoX}
		if r := m.Post(t, "charge", visa); r.Status != 200 {
			t.Fatalf("visa token without xid: %s", r.Body)
		}
	})
}

// A form payment takes the same 3-D Secure path as a charge.
func TestFormPaymentThreeDS(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)
	for _, c := range []struct {
		name, card string
		force      bool
		outcome    string
		status     string
	}{
		{"enrolled, authenticated", "4000000000003220", false, "success", "authorized"},
		{"force, not authenticated", "4111111111111111", true, "failure", "declined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := newOrderID("f3ds")
			body := initBody(id, 1020, "EUR")
			body["fail_url"] = "https://shop.example/fail"
			body["success_url"] = "https://shop.example/ok"
			if c.force {
				body["three_ds"] = map[string]any{"force": true}
			}
			formURL := initForm(t, m, body)
			st, ans := payForm(t, formURL, formCard(c.card))
			redirect, _ := ans["redirect_url"].(string)
			if st != 200 || ans["status"] != "processing" || !strings.HasPrefix(redirect, n.URL()+"/api/v3/3ds/") {
				t.Fatalf("form payment of an enrolled card: %d %v", st, ans)
			}
			answerChallenge(t, redirect, c.outcome)
			res := waitPage(t, redirect+"/status")
			want := map[string]string{"authorized": "https://shop.example/ok", "declined": "https://shop.example/fail"}[c.status]
			if res["status"] != c.status || !strings.HasPrefix(res["return_url"].(string), want+"?order_id=") {
				t.Fatalf("after the issuer page: %v", res)
			}
			if st, _, page := httpDo(t, "GET", redirect+"/result", "", ""); st != 200 || !strings.Contains(string(page), `id="pg-live"`) {
				t.Fatalf("result page: %d", st)
			}
		})
	}
}
