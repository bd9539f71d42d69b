package order_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/paygate/gateway/order"
)

// The transcript commands of the hosted form and 3-D Secure (see the runner's
// doc comment in script_test.go). Like the leader, the runner decides the
// form's expiry (now + ttl), the challenge's id, redirect_url and expiry, and
// the authentication values of the sandbox access control server.

// formCommand fills cmd for a form or 3-D Secure command; false if verb is
// not one of them.
func (s *script) formCommand(verb string, a *args, cmd *order.Command) bool {
	t := s.t
	pendingTxn := func() string {
		id := "t1"
		if s.cur != nil && s.cur.Pending != nil {
			id = s.cur.Pending.TxnID
		}
		return a.str("txn", id)
	}
	ttl := func(def string) int64 {
		d, err := time.ParseDuration(a.str("ttl", def))
		if err != nil {
			t.Fatalf("%s: ttl: %v", a.pos, err)
		}
		return int64(d)
	}
	cmd.ARN = ""
	switch verb {
	case "init":
		cmd.Kind, cmd.TxnID, cmd.RequestHash = order.KindInitPayment, "", a.str("hash", "h1")
		cmd.Create = &order.CreateData{Amount: a.int(t, "amount", 0), Currency: a.str("currency", "USD"),
			Description: "form order", ProcessingMID: "mid1", SettleDelayHours: a.int(t, "delay", 0),
			SuccessURL: "https://shop.example/ok", FailURL: "https://shop.example/fail",
			ThreeDSForce: a.has("force"), AttemptNonSecure: a.has("attempt-non-secure")}
		cmd.Form = &order.FormData{TokenHash: "sha256-of-token", ExpiresAt: s.now + ttl("30m"), Language: a.str("lang", "")}
	case "submit":
		cmd.Kind = order.KindFormSubmit
		cmd.Submit = &order.SubmitData{
			Source: order.PaymentSource{Type: "card", CardID: "card-1", Brand: "visa", Masked: "400000******3220",
				Billing: &order.Address{City: "Springfield"}},
			SealedCard: []byte("sealed"),
		}
	case "challenge":
		cmd.Kind, cmd.TxnID = order.KindThreeDSChallenge, pendingTxn()
		id := a.str("id", "c1")
		cmd.Challenge = &order.ChallengeData{ID: id, RedirectURL: "https://pay.example/api/v3/3ds/" + id,
			ExpiresAt: s.now + ttl("10m")}
	case "3ds-result":
		cmd.Kind, cmd.TxnID = order.KindThreeDSResult, pendingTxn()
		r := &order.ThreeDSResultData{ChallengeID: a.str("id", "c1")}
		switch {
		case a.has("authenticated"):
			r.Authenticated = true
			r.Result = &order.ThreeDS{AuthenticationResult: "Y", Version: "2.2.0", ECI: "05",
				CAVV: "AAABBEg0VhI0VniQEjRWAAAAAAA=", XID: "MDAwMDAwMDAwMDAwMDAwMDAwMDE="}
		case a.has("failed"):
			r.Result = &order.ThreeDS{AuthenticationResult: "N", Version: "2.2.0"}
			r.DeclineCode, r.DeclineMessage = "5.01", declineMessages["5.01"]
		case a.has("timed-out"):
			r.Result = &order.ThreeDS{AuthenticationResult: order.AuthenticationTimedOut, Version: "2.2.0"}
			r.DeclineCode, r.DeclineMessage = "5.01", declineMessages["5.01"]
		default:
			t.Fatalf("%s: 3ds-result needs authenticated, failed or timed-out", a.pos)
		}
		cmd.ThreeDSResult = r
	case "non-secure":
		cmd.Kind, cmd.TxnID = order.KindNonSecure, pendingTxn()
	case "expire":
		cmd.Kind, cmd.TxnID = order.KindExpire, ""
	default:
		return false
	}
	return true
}

// createsTxn reports whether an accepted command of kind k adds a
// transaction (and so uses up a transaction id of the transcript).
func createsTxn(k order.Kind) bool {
	switch k {
	case order.KindCreate, order.KindFormSubmit, order.KindSettle, order.KindVoid, order.KindRefund:
		return true
	}
	return false
}

// renderForm adds the form and 3-D Secure parts of an order that are set.
func renderForm(b *strings.Builder, o *order.Order) {
	if o.FormTokenHash != "" {
		fmt.Fprintf(b, "\nform token_hash=%s expires=%s", o.FormTokenHash, order.FormatTime(o.FormExpiresAt))
		if o.Language != "" {
			fmt.Fprintf(b, " lang=%s", o.Language)
		}
	}
	if o.ThreeDSForce || o.AttemptNonSecure {
		fmt.Fprintf(b, "\nthree_ds force=%v attempt_non_secure=%v", o.ThreeDSForce, o.AttemptNonSecure)
	}
	if o.RedirectURL != "" {
		fmt.Fprintf(b, "\nredirect_url=%s", o.RedirectURL)
	}
	if t := o.ThreeDS; t != nil && (t.AuthenticationResult != "" || t.Enrolled != "") {
		fmt.Fprintf(b, "\nthree_ds authentication_result=%q enrolled=%q version=%q eci=%q",
			t.AuthenticationResult, t.Enrolled, t.Version, t.ECI)
	}
	if d := o.ExpiresAt(); d != 0 {
		fmt.Fprintf(b, "\nexpiry_due=%s", order.FormatTime(d))
	}
}

// renderChallenge adds an open challenge to the pending line.
func renderChallenge(b *strings.Builder, p *order.PendingAuth) {
	if p.Challenge != "" {
		fmt.Fprintf(b, " challenge=%s (the customer's turn: not due at the acquirer)", p.Challenge)
	} else if p.ThreeDS != nil && p.ThreeDS.Enrolled != "" {
		fmt.Fprintf(b, " three_ds.enrolled=%s", p.ThreeDS.Enrolled)
	}
}

// formCommand makes, now and then, a hosted form or 3-D Secure command for
// the property test: mostly plausible for cur, with wrong challenge ids,
// early expiries and late submits mixed in. It reports whether it did.
func (g *gen) formCommand(cur *order.Order, cmd *order.Command) bool {
	r := g.rng.IntN(100)
	switch {
	case cur == nil && r < 40, cur != nil && r < 2:
		cmd.Kind, cmd.TxnID, cmd.ARN = order.KindInitPayment, "", ""
		cmd.RequestHash = []string{"h1", "h1", "h3"}[g.rng.IntN(3)]
		cmd.Create = &order.CreateData{Amount: 1 + g.rng.Int64N(5000), Currency: "EUR", ProcessingMID: "mid1",
			SettleDelayHours: g.pick(0, 24), ThreeDSForce: g.rng.IntN(2) == 0}
		cmd.Form = &order.FormData{TokenHash: "hash", ExpiresAt: g.now + g.pick(3, 10, 3600)*fxSecond, Language: "fr"}
	case cur == nil:
		return false
	case cur.Status == order.StatusCreated && r < 30:
		cmd.Kind = order.KindFormSubmit
		cmd.Submit = &order.SubmitData{Source: order.PaymentSource{Type: "card", CardID: "c-" + cmd.TxnID,
			Billing: &order.Address{City: "Y"}}, SealedCard: []byte{1}}
	case cur.Status == order.StatusCreated && r < 90:
		cmd.Kind, cmd.TxnID = order.KindExpire, ""
	case cur.Status == order.StatusProcessing && r < 50:
		txn := cur.Pending.TxnID
		switch g.rng.IntN(3) {
		case 0:
			cmd.Kind, cmd.TxnID = order.KindThreeDSChallenge, txn
			cmd.Challenge = &order.ChallengeData{ID: "ch-" + cmd.ARN, RedirectURL: "https://pay.example/3ds",
				ExpiresAt: g.now + 600*fxSecond}
		case 1:
			id := cur.Pending.Challenge
			if g.rng.IntN(5) == 0 {
				id = "ch-wrong"
			}
			ok := g.rng.IntN(2) == 0
			cmd.Kind, cmd.TxnID = order.KindThreeDSResult, txn
			cmd.ThreeDSResult = &order.ThreeDSResultData{ChallengeID: id, Authenticated: ok,
				Result: &order.ThreeDS{AuthenticationResult: "Y", ECI: "05", CAVV: "Y2F2dg=="}}
			if !ok {
				cmd.ThreeDSResult.Result = &order.ThreeDS{AuthenticationResult: "N"}
				cmd.ThreeDSResult.DeclineCode, cmd.ThreeDSResult.DeclineMessage = "5.01", "3-D Secure authentication failed"
			}
		default:
			cmd.Kind, cmd.TxnID = order.KindNonSecure, txn
		}
		cmd.ARN = ""
	default:
		return false
	}
	return true
}
