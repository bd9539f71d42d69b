package order

import "time"

// IdempotencyWindow is how long an Idempotency-Key replays its first answer.
const IdempotencyWindow = 24 * time.Hour

// KeyUse is what a request that carries an Idempotency-Key gets.
type KeyUse uint8

const (
	// KeyFresh: the key has no first answer within its window; the request
	// is decided as a new one (and its answer becomes the key's).
	KeyFresh KeyUse = iota
	// KeyRepeat: the same request again; it gets the first answer again.
	KeyRepeat
	// KeyConflict: another request under a used key; it is refused
	// (KeyConflictRejection).
	KeyConflict
)

// UseOfKey decides a request that carries an Idempotency-Key (contract
// section 5) from the key's stored first use: firstAt and firstHash are its
// time and request hash (a key with none is KeyFresh). now is the
// request's time: the command's in the FSM, so every replica decides
// alike, and the leader's clock in the order actor's check before it
// proposes. It is the one place the rule is written.
func UseOfKey(firstAt int64, firstHash string, now int64, hash string) KeyUse {
	switch {
	case now-firstAt >= int64(IdempotencyWindow):
		return KeyFresh
	case firstHash == hash:
		return KeyRepeat
	default:
		return KeyConflict
	}
}

// KeyConflictRejection is the refusal of a KeyConflict.
func KeyConflictRejection() *Rejection {
	return &Rejection{Kind: RejectConflict, Attribute: "idempotency-key",
		Message: "Idempotency-Key has already been used with a different request"}
}
