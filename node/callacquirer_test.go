package node

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/paygate/gateway/transport/acquirer"
)

// callAcquirer is the acquirer as a plain function call, the way the
// in-process sandbox was before the link (issue 35): it decides by the
// test cards of contract 7 exactly as the sandbox host does (host's
// decideCard, the same response code table, auth codes and ARNs), with no
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
	avs, cvv := acquirer.AVSMatch, acquirer.CVVMatch
	if req.CVV == "" {
		cvv = acquirer.CVVNotProcessed
	}
	code := acquirer.RespApproved
	switch req.PAN {
	case acquirer.CardDoNotHonour:
		code = acquirer.RespDoNotHonour
	case acquirer.CardInsufficientFunds:
		code = acquirer.RespInsufficientFunds
	case acquirer.CardExpired:
		code = acquirer.RespExpiredCard
	case acquirer.CardInvalidCVV:
		code, cvv = acquirer.RespCVVFailed, acquirer.CVVNoMatch
	case acquirer.CardUnreachable:
		code, avs, cvv = acquirer.RespIssuerUnavailable, acquirer.AVSUnavailable, acquirer.CVVNotProcessed
	case acquirer.CardRiskBlocked:
		code = acquirer.RespSuspectedFraud
	case acquirer.Card3DSEnrolled:
		if !req.ThreeDS.Authenticated && req.Cryptogram == "" {
			code = acquirer.RespAuthenticationNeeded
		}
	case acquirer.Card3DSNotEnrolled:
		if !req.ThreeDS.NonSecure || req.ThreeDS.Authenticated {
			code = acquirer.RespAuthenticationNeeded
		}
	}
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
// sandbox's deterministic decline (acquirer.DeclinesMove).
func (a *callAcquirer) Move(_ context.Context, req acquirer.MoveRequest) (acquirer.MoveResult, error) {
	if req.Kind != acquirer.MoveReversal && acquirer.DeclinesMove(req.Amount) {
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
