package actors

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer"
)

func threeDSFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	f.deps.ThreeDS = ThreeDSConfig{URLBase: "http://pay.test", TTL: time.Minute}
	return f
}

// charge3DS creates a charge with the given card and 3-D Secure options.
func (f *fixture) charge3DS(t *testing.T, id, pan string, force, attempt bool, mpi *order.ThreeDS) *Reply {
	t.Helper()
	msg := &Create{
		Merchant: "m1", OrderID: id, RequestHash: "h-" + id,
		Data: order.CreateData{Amount: 1000, Currency: "USD", ProcessingMID: "mid", SettleDelayHours: 24,
			ThreeDSForce: force, AttemptNonSecure: attempt, ThreeDS: mpi},
		Card: &vault.Card{PAN: pan, ExpMonth: "12", ExpYear: "2035", HolderName: "A B"},
		CVV:  "123",
	}
	return f.request(t, id, msg)
}

func (f *fixture) request(t *testing.T, id string, msg any) *Reply {
	t.Helper()
	r, err := f.reg.Request(Key{"m1", id}, msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.(*Reply)
	if rep.Err != nil {
		t.Fatalf("reply error: %v", rep.Err)
	}
	return rep
}

func (f *fixture) pendingAuths(t *testing.T) map[string]bool {
	t.Helper()
	refs, err := f.store.PendingAuths()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, r := range refs {
		out[r.OrderID] = true
	}
	return out
}

// The charge answers with the order in verify and its redirect_url; the
// acquirer is asked only after the customer authenticated, with the CVV the
// actor held in memory and the authentication values.
func TestThreeDSChallengeAuthenticated(t *testing.T) {
	f := threeDSFixture(t)
	r := f.charge3DS(t, "enrolled", acquirer.Card3DSEnrolled, false, false, nil)
	o := r.Order
	if o.Status != order.StatusProcessing || o.Txns[0].Status != order.TxnVerify ||
		!strings.HasPrefix(o.RedirectURL, "http://pay.test/api/v3/3ds/") || o.Pending.Challenge == "" {
		t.Fatalf("want verify with a redirect_url: %+v", o)
	}
	id := strings.TrimPrefix(o.RedirectURL, "http://pay.test/api/v3/3ds/")
	if len(id) < 40 || id != o.Pending.Challenge {
		t.Fatalf("challenge id %q is not the unguessable id of the redirect_url", id)
	}
	if f.acq.Total() != 0 {
		t.Fatal("the acquirer was asked before 3-D Secure")
	}
	if f.pendingAuths(t)["enrolled"] {
		t.Fatal("an order waiting for the customer is in the resume set")
	}
	// A restart now: the resume must leave it to the customer. The actor
	// takes its messages in order, so the answer to a request sent after
	// the resume means the resume has been handled (a call it started would
	// also count at the end: one authorisation of the transaction).
	f.reg.Send(Key{"m1", "enrolled"}, ResumeAuth{})
	if r := f.request(t, "enrolled", &Operation{Kind: order.KindSettle, Merchant: "m1", OrderID: "enrolled", Amount: 1}); r.Reject == nil {
		t.Fatalf("settle of an order in verify: %+v", r)
	}
	if f.acq.Total() != 0 {
		t.Fatal("resume sent an order waiting in verify to the acquirer")
	}
	if ref, err := f.store.ChallengeOrder(id); err != nil || ref == nil || ref.OrderID != "enrolled" {
		t.Fatalf("challenge index: %v %v", ref, err)
	}
	f.request(t, "enrolled", &ThreeDSAnswer{ChallengeID: id, Authenticated: true})
	done := f.waitStatus(t, "m1", "enrolled", order.StatusAuthorized)
	td := done.ThreeDS
	if td == nil || td.AuthenticationResult != "Y" || td.Version != ACSVersion || td.ECI != "05" || td.CAVV == "" || td.XID == "" {
		t.Fatalf("three_ds after authentication: %+v", td)
	}
	if done.CVVCheck != acquirer.CVVMatch {
		t.Fatalf("cvv_check %q: the held CVV did not reach the acquirer", done.CVVCheck)
	}
	if n := f.acq.Authorizations(done.Txns[0].ID); n != 1 {
		t.Fatalf("%d authorisations", n)
	}
	// A second click changes nothing.
	again := f.request(t, "enrolled", &ThreeDSAnswer{ChallengeID: id, Authenticated: false})
	if again.Order.Status != order.StatusAuthorized {
		t.Fatalf("second answer: %+v", again.Order)
	}
}

func TestThreeDSChallengeFailed(t *testing.T) {
	f := threeDSFixture(t)
	o := f.charge3DS(t, "fail", acquirer.Card3DSEnrolled, false, false, nil).Order
	f.request(t, "fail", &ThreeDSAnswer{ChallengeID: o.Pending.Challenge, Authenticated: false})
	done := f.waitStatus(t, "m1", "fail", order.StatusDeclined)
	if done.Decline.Code != acquirer.Code3DSFailed || done.ThreeDS.AuthenticationResult != "N" || done.Txns[0].Status != order.TxnFail {
		t.Fatalf("declined order: %+v %+v", done.Decline, done.ThreeDS)
	}
	if f.acq.Total() != 0 {
		t.Fatal("the acquirer was asked after a failed authentication")
	}
}

// A customer's "authenticated" that comes after the challenge ended, before
// the scheduler's pass has closed it, is the timeout: declined 5.01, and the
// acquirer is never asked.
func TestThreeDSAnswerAfterTheChallengeEnded(t *testing.T) {
	f := threeDSFixture(t)
	var later atomic.Int64
	f.deps.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	o := f.charge3DS(t, "late", acquirer.Card3DSEnrolled, false, false, nil).Order
	later.Store(int64(2 * f.deps.ThreeDS.TTL)) // the challenge has ended; no scheduler runs
	f.request(t, "late", &ThreeDSAnswer{ChallengeID: o.Pending.Challenge, Authenticated: true})
	done := f.waitStatus(t, "m1", "late", order.StatusDeclined)
	if done.Decline.Code != acquirer.Code3DSFailed || done.ThreeDS.AuthenticationResult != AuthResultTimeout {
		t.Fatalf("late answer: %+v %+v", done.Decline, done.ThreeDS)
	}
	if f.acq.Total() != 0 {
		t.Fatal("the acquirer was asked after the challenge ended")
	}
}

func TestThreeDSDecisions(t *testing.T) {
	f := threeDSFixture(t)
	mpi := &order.ThreeDS{Version: "2.2.0", ECI: "05", CAVV: "AAABBEg0VhI0VniQEjRWAAAAAAA=", AuthenticationResult: "Y"}
	for _, c := range []struct {
		name           string
		pan            string
		force, attempt bool
		mpi            *order.ThreeDS
		want           order.Status // after the first reply settles
		challenge      bool
		decline        string
		enrolled       string
	}{
		{"ordinary", acquirer.CardVisaApproved, false, false, nil, order.StatusAuthorized, false, "", ""},
		{"ordinary-force", acquirer.CardVisaApproved, true, false, nil, order.StatusProcessing, true, "", ""},
		{"enrolled-mpi", acquirer.Card3DSEnrolled, false, false, mpi, order.StatusAuthorized, false, "", ""},
		{"enrolled-force-mpi", acquirer.Card3DSEnrolled, true, false, mpi, order.StatusAuthorized, false, "", ""},
		{"not-enrolled", acquirer.Card3DSNotEnrolled, false, false, nil, order.StatusDeclined, false, "5.01", ""},
		{"not-enrolled-attempt", acquirer.Card3DSNotEnrolled, false, true, nil, order.StatusDeclined, false, "5.01", ""},
		{"not-enrolled-force", acquirer.Card3DSNotEnrolled, true, false, nil, order.StatusDeclined, false, "5.01", ""},
		{"not-enrolled-non-secure", acquirer.Card3DSNotEnrolled, true, true, nil, order.StatusAuthorized, false, "", "N"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := f.charge3DS(t, c.name, c.pan, c.force, c.attempt, c.mpi)
			if got := r.Order.Pending != nil && r.Order.Pending.Challenge != ""; got != c.challenge {
				t.Fatalf("challenge %v, want %v: %+v", got, c.challenge, r.Order)
			}
			o := f.waitStatus(t, "m1", c.name, c.want)
			if c.decline != "" && o.Decline.Code != c.decline {
				t.Fatalf("decline %+v, want %s", o.Decline, c.decline)
			}
			if c.decline != "" && f.acq.Authorizations(o.Txns[0].ID) != 0 {
				t.Fatal("the acquirer was asked for a payment 3-D Secure declined")
			}
			if got := ""; o.ThreeDS != nil {
				got = o.ThreeDS.Enrolled
				if got != c.enrolled {
					t.Fatalf("three_ds.enrolled %q, want %q", got, c.enrolled)
				}
			} else if c.enrolled != "" {
				t.Fatalf("no three_ds, want enrolled %q", c.enrolled)
			}
			if c.mpi != nil && (o.ThreeDS == nil || o.ThreeDS.CAVV != c.mpi.CAVV) {
				t.Fatalf("mpi three_ds not shown: %+v", o.ThreeDS)
			}
		})
	}
}

// A payment created but not yet decided when the node stopped: the resume
// decides 3-D Secure again rather than sending it to the acquirer.
func TestThreeDSResumeDecidesAgain(t *testing.T) {
	f := threeDSFixture(t)
	f.charge3DS(t, "seed", acquirer.Card3DSEnrolled, false, false, nil) // a sealed 3220 card to reuse
	seed, _ := f.store.GetOrder("m1", "seed")
	cmd := &order.Command{Kind: order.KindCreate, Time: time.Now().UnixNano(), Merchant: "m1", OrderID: "left",
		TxnID: "txn-left", RequestHash: "h", Create: &order.CreateData{Amount: 50, Currency: "USD",
			ProcessingMID: "mid", SettleDelayHours: 24, Source: seed.Source}}
	if _, err := f.proposer.Propose(context.Background(), &command.Cmd{Order: cmd}); err != nil {
		t.Fatal(err)
	}
	if !f.pendingAuths(t)["left"] {
		t.Fatal("an undecided payment is not in the resume set")
	}
	f.reg.Send(Key{"m1", "left"}, ResumeAuth{})
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, _ := f.store.GetOrder("m1", "left")
		if o.Pending != nil && o.Pending.Challenge != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resume did not challenge: %+v", o)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if f.acq.Authorizations("txn-left") != 0 || f.pendingAuths(t)["left"] {
		t.Fatal("resumed payment went to the acquirer, or stayed due")
	}
}

func initForm(t *testing.T, f *fixture, id string, ttl time.Duration, force bool) {
	t.Helper()
	now := time.Now()
	r := f.request(t, id, &InitPayment{Merchant: "m1", OrderID: id, RequestHash: "init-" + id, Time: now,
		Data: order.CreateData{Amount: 700, Currency: "EUR", ProcessingMID: "mid", SettleDelayHours: 24, ThreeDSForce: force},
		Form: order.FormData{TokenHash: persistence.SecretHash("tok-" + id), ExpiresAt: now.Add(ttl).UnixNano(), Language: "de"}})
	if r.Reject != nil || r.Order.Status != order.StatusCreated {
		t.Fatalf("init: %+v %+v", r.Reject, r.Order)
	}
}

func TestFormPaymentAndSingleUse(t *testing.T) {
	f := threeDSFixture(t)
	initForm(t, f, "form", time.Hour, false)
	rec, err := f.store.FormByTokenHash(persistence.SecretHash("tok-form"))
	if err != nil || rec == nil || rec.OrderID != "form" || rec.Consumed {
		t.Fatalf("form index: %+v %v", rec, err)
	}
	card := vault.Card{PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2035", HolderName: "A B"}
	r := f.request(t, "form", &FormPayment{Merchant: "m1", OrderID: "form", Card: card, CVV: "123"})
	if r.Reject != nil || r.Order.Status != order.StatusProcessing || r.Order.Source.Masked != "411111******1111" {
		t.Fatalf("form payment: %+v %+v", r.Reject, r.Order)
	}
	o := f.waitStatus(t, "m1", "form", order.StatusAuthorized)
	if o.CVVCheck != acquirer.CVVMatch || o.Source.PaymentToken == "" {
		t.Fatalf("authorised form payment: %+v", o)
	}
	if rec, _ := f.store.FormByTokenHash(persistence.SecretHash("tok-form")); rec == nil || !rec.Consumed {
		t.Fatalf("token not consumed: %+v", rec)
	}
	again := f.request(t, "form", &FormPayment{Merchant: "m1", OrderID: "form", Card: card, CVV: "123"})
	if again.Reject == nil || again.Reject.Kind != order.RejectIllegalStatus {
		t.Fatalf("second payment of one form: %+v", again)
	}
	if f.acq.Total() != 1 {
		t.Fatalf("%d authorisations for one form", f.acq.Total())
	}
}

func TestFormPaymentWithThreeDS(t *testing.T) {
	f := threeDSFixture(t)
	initForm(t, f, "form3ds", time.Hour, true)
	card := vault.Card{PAN: acquirer.CardMastercardApproved, ExpMonth: "12", ExpYear: "2035", HolderName: "A B"}
	r := f.request(t, "form3ds", &FormPayment{Merchant: "m1", OrderID: "form3ds", Card: card, CVV: "123"})
	if r.Order.RedirectURL == "" || r.Order.Txns[0].Status != order.TxnVerify {
		t.Fatalf("force on a form payment: %+v", r.Order)
	}
	f.request(t, "form3ds", &ThreeDSAnswer{ChallengeID: r.Order.Pending.Challenge, Authenticated: true})
	o := f.waitStatus(t, "m1", "form3ds", order.StatusAuthorized)
	if o.ThreeDS.ECI != "02" {
		t.Fatalf("mastercard ECI: %+v", o.ThreeDS)
	}
}

func TestSchedulerExpiresFormsAndChallenges(t *testing.T) {
	f := threeDSFixture(t)
	f.deps.ThreeDS.TTL = 30 * time.Millisecond
	initForm(t, f, "short", 30*time.Millisecond, false)
	initForm(t, f, "long", time.Hour, false)
	open := f.charge3DS(t, "abandoned", acquirer.Card3DSEnrolled, false, false, nil).Order
	if open.Pending.Challenge == "" {
		t.Fatal("no challenge")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done }) // before the fixture closes the store
	s := &Scheduler{Store: f.store, Registry: f.reg, Logger: f.deps.Logger, Now: time.Now,
		Poll: time.Hour, ExpiryPoll: 5 * time.Millisecond}
	go func() { defer close(done); s.Run(ctx) }()
	f.waitStatus(t, "m1", "short", order.StatusExpired)
	o := f.waitStatus(t, "m1", "abandoned", order.StatusDeclined)
	if o.Decline.Code != "5.01" || o.ThreeDS.AuthenticationResult != AuthResultTimeout {
		t.Fatalf("abandoned challenge: %+v %+v", o.Decline, o.ThreeDS)
	}
	if l, _ := f.store.GetOrder("m1", "long"); l.Status != order.StatusCreated {
		t.Fatalf("a live form expired: %s", l.Status)
	}
	card := vault.Card{PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: "2035", HolderName: "A B"}
	r := f.request(t, "short", &FormPayment{Merchant: "m1", OrderID: "short", Card: card})
	if r.Reject == nil {
		t.Fatal("an expired form took a payment")
	}
	if next, _ := f.store.NextExpiry(); next == 0 {
		t.Fatal("the live form left the expiry schedule")
	}
}
