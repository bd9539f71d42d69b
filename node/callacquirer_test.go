package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
)

// callAcquirer is the acquirer as a plain function call, the way the
// in-process sandbox was before the link (issue 35): it decides by the
// test cards of contract 7 exactly as the sandbox host does (the same
// acquirer.DecideTestCard, Luhn and expiry rules, response code table, auth
// codes and ARNs), with no
// ISO 8583 message, no connection, no host goroutine and no ledger. It
// exists only for the A/B benchmark of the link's cost
// (BenchmarkChargeCallAcquirer against BenchmarkChargeInProcess); it is
// not an acquirer a node may run with.
type callAcquirer struct {
	acquirer.SandboxDirectory
	stan atomic.Uint32
}

func (a *callAcquirer) Authorize(_ context.Context, req acquirer.AuthRequest) (acquirer.AuthResult, error) {
	if req.Reference == "" {
		return acquirer.AuthResult{}, acquirer.ErrNoReference
	}
	now := time.Now().UTC()
	threeDS := ""
	switch {
	case req.ThreeDS.Authenticated:
		threeDS = "Y"
	case req.ThreeDS.NonSecure:
		threeDS = "N"
	}
	code, avs, cvv := acquirer.DecideTestCard(req.PAN, req.CVV != "", threeDS, req.Cryptogram != "")
	switch {
	case code != acquirer.RespApproved:
	case !acquirer.Luhn(req.PAN):
		code = acquirer.RespDoNotHonour
	case cardExpired(req.ExpMonth, req.ExpYear, now):
		code = acquirer.RespExpiredCard
	}
	row := acquirer.ResponseFor(code)
	// A trace as the link's (STAN and transmission time, 16 digits): the
	// order keeps it for its capture or reversal.
	trace := strconv.Itoa(1_000_000 + int(a.stan.Add(1)%999_999))[1:] + now.Format("0102150405")
	r := acquirer.AuthResult{AVSCheck: avs, CVVCheck: cvv, RiskDecision: row.Risk, Trace: trace}
	if code != acquirer.RespApproved {
		r.DeclineCode, r.DeclineMessage = row.Decline, row.Message
		return r, nil
	}
	mid := acquirer.CardAcceptorID(req.MID, req.MerchantID)
	r.Approved, r.AuthCode, r.ARN = true, acquirer.AuthCode(mid+acquirer.RRN(req.Reference)), acquirer.ARN(mid+acquirer.RRN(req.Reference))
	return r, nil
}

// Move approves a capture, reversal or refund at once, but for the
// sandbox's deterministic decline (acquirer.DeclinesMove); a reversal,
// always acknowledged, carries no ARN.
func (a *callAcquirer) Move(_ context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error) {
	if req.Kind == acquirer.MoveReversal {
		return acquirer.MoveResult{Approved: true}, nil
	}
	if acquirer.DeclinesMove(req.Amount) {
		row := acquirer.ResponseFor(acquirer.RespDoNotHonour)
		return acquirer.MoveResult{DeclineCode: row.Decline, DeclineMessage: row.Message}, nil
	}
	return acquirer.MoveResult{Approved: true, ARN: acquirer.ARN(acquirer.CardAcceptorID(req.MID, req.MerchantID) + req.RRN)}, nil
}

// cardExpired reports whether a card expiring in month/year (MM or M,
// YYYY) can no longer be used at now; an impossible expiry is expired.
func cardExpired(month, year string, now time.Time) bool {
	m, merr := strconv.Atoi(month)
	y, yerr := strconv.Atoi(year)
	if merr != nil || yerr != nil || len(year) != 4 || m < 1 || m > 12 {
		return true
	}
	return y < now.Year() || y == now.Year() && time.Month(m) < now.Month()
}

// The function-call acquirer of the A/B benchmark answers every test card
// (contract 7) as the link to the sandbox host does: same approval, decline
// code, AVS and CVV letters, auth code and ARN; and a movement likewise.
// Otherwise the benchmark would compare two different workloads.
func TestCallAcquirerDecidesAsTheHost(t *testing.T) {
	h, err := host.Open(host.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		CaptureUnknownOriginals: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	client := link.Dial(link.Config{Addr: "in-process", Timeout: 5 * time.Second,
		Dial: func(context.Context, string) (net.Conn, error) {
			c, s := link.Pipe()
			go h.ServeConn(s)
			return c, nil
		}})
	defer client.Close()
	viaLink, call := link.NewAcquirer(client), &callAcquirer{}
	year := strconv.Itoa(time.Now().Year() + 2)
	cards := []string{acquirer.CardVisaApproved, acquirer.CardMastercardApproved, acquirer.CardAmexApproved,
		acquirer.CardDoNotHonour, acquirer.CardInsufficientFunds, acquirer.CardExpired, acquirer.CardInvalidCVV,
		acquirer.CardUnreachable, acquirer.CardRiskBlocked, acquirer.Card3DSEnrolled, acquirer.Card3DSNotEnrolled,
		"4111111111111112"} // not Luhn
	threeDS := []acquirer.ThreeDSData{{}, {Authenticated: true, ECI: "05", CAVV: "AAABBBCCC"}, {NonSecure: true}}
	ctx := context.Background()
	for i, pan := range cards {
		for j, tds := range threeDS {
			for _, exp := range [][2]string{{"12", year}, {"01", "2020"}} {
				for _, cvv := range []string{"123", ""} {
					req := acquirer.AuthRequest{Reference: fmt.Sprintf("tx_%d_%d_%s_%s", i, j, exp[1], cvv),
						PAN: pan, ExpMonth: exp[0], ExpYear: exp[1], CVV: cvv, Amount: 1000, Currency: "USD",
						MerchantID: "mer_test", MID: "MID1", ThreeDS: tds}
					want, err := viaLink.Authorize(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					got, _ := call.Authorize(ctx, req)
					want.Trace, got.Trace = "", ""
					if got != want {
						t.Errorf("%s, 3-D Secure %+v, expiry %s, CVV %q:\nfunction call %+v\nlink         %+v", pan, tds, exp, cvv, got, want)
					}
				}
			}
		}
	}
	for _, kind := range []string{acquirer.MoveCapture, acquirer.MoveRefund, acquirer.MoveReversal} {
		for _, amount := range []int64{1000, acquirer.MoveDeclineAmount} {
			ref := fmt.Sprintf("mv_%s_%d", kind, amount)
			req := acquirer.MoveRequest{Kind: kind, STAN: acquirer.STAN(ref), RRN: acquirer.RRN(ref), At: time.Now(),
				Amount: amount, Currency: "USD", MID: "MID1", MerchantID: "mer_test", OrigMTI: "0100",
				PAN: acquirer.CardVisaApproved, ExpMonth: "12", ExpYear: year}
			want, err := viaLink.Move(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := call.Move(ctx, req); got != want {
				t.Errorf("%s of %d: function call %+v, link %+v", kind, amount, got, want)
			}
		}
	}
}
