package acquirer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Movement kinds (order.MoveKind's values): what a MoveRequest asks for.
const (
	MoveCapture  = "capture"  // 0220, repeated as 0221
	MoveReversal = "reversal" // 0400, repeated as 0401
	MoveRefund   = "refund"   // 0200 with processing code 200000
)

// MoveRequest is a money movement already recorded in the gateway's log:
// every attempt carries the same STAN, RRN and transmission time (At).
type MoveRequest struct {
	Kind   string
	Repeat bool // not the first attempt: an advice goes as 0221/0401
	STAN   string
	RRN    string
	At     time.Time
	Amount int64
	// Currency is alphabetic (ISO 4217).
	Currency   string
	MID        string
	MerchantID string
	// AcquirerAddr is the host the order's MID is registered with: the one
	// that authorised it. Empty: the node's default acquirer.
	AcquirerAddr string
	// OrigMTI and OrigTrace name the authorisation or sale a capture or
	// reversal undoes or completes (field 90): its MTI, and its STAN and
	// transmission time (16 digits) when its answer came, else empty.
	OrigMTI   string
	OrigTrace string
	// PAN and expiry: a refund's card.
	PAN, ExpMonth, ExpYear string
}

// MoveResult is the acquirer's answer to a movement.
type MoveResult struct {
	Approved       bool
	ARN            string
	DeclineCode    string
	DeclineMessage string
}

// STAN derives a movement's systems trace audit number from its
// reference, as RRN does its RRN: the leader writes it into the log, so
// every attempt on any node sends the same. 000001 to 999999.
func STAN(reference string) string {
	sum := sha256.Sum256([]byte("stan:" + reference))
	return fmt.Sprintf("%06d", binary.BigEndian.Uint64(sum[:8])%999_999+1)
}

// MoveDeclineAmount is the sandbox's deterministic decline of a movement
// (docs/acquirer.md, "Declined movements"): a capture or refund whose
// amount in minor units ends in these four digits (99.05, 199.05, ...) is
// answered 05, do not honour (3.08), as a real acquirer declines a capture
// of a lapsed authorisation or a refund to a closed account. The test cards
// decide authorisations; this is how a test gets a movement declined.
const MoveDeclineAmount = 9905

// DeclinesMove reports whether the sandbox declines a capture or refund of
// amount (MoveDeclineAmount).
func DeclinesMove(amount int64) bool { return amount%10_000 == MoveDeclineAmount }
