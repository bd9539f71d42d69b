package persistence

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/paygate/gateway/order"
)

// Keys of the hosted form and 3-D Secure (see DESIGN.md). Bearer secrets
// (the form token, the challenge id) appear in keys only as their SHA-256:
// a copy of the store or a snapshot does not open anyone's form.
const (
	prefixForm      = "f/" // f/<sha256(form token) hex> → FormRecord JSON
	prefixChallenge = "d/" // d/<sha256(challenge id) hex> → <merchant>\x00<order_id>
	prefixExpiry    = "e/" // e/<due ns BE><merchant>\x00<order_id> → "" (form lifetime and 3-D Secure challenge expiry)
)

// SecretHash is the lowercase hex SHA-256 of a bearer secret (a form token
// or a challenge id): what the store keeps instead of the secret.
func SecretHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// FormRecord is the form token index entry: which order a token opens.
// Consumed is set in the batch that applies the form's payment: the token
// pays once (Apply refuses a second submit in any case); it still opens the
// page, which then follows the payment instead of offering the form.
type FormRecord struct {
	Merchant string `json:"merchant"`
	OrderID  string `json:"order_id"`
	Consumed bool   `json:"consumed,omitempty"`
}

// FormByTokenHash returns the form record of a token's SHA-256, or nil.
func (s *Store) FormByTokenHash(tokenHash string) (*FormRecord, error) {
	return getJSON[FormRecord](s.db, append([]byte(prefixForm), tokenHash...))
}

// ChallengeOrder returns the order of a 3-D Secure challenge id, or nil.
func (s *Store) ChallengeOrder(challengeID string) (*OrderRef, error) {
	v, err := get(s.db, append([]byte(prefixChallenge), SecretHash(challengeID)...))
	if err != nil || v == nil {
		return nil, err
	}
	ref := splitRef(v)
	return &ref, nil
}

// DueExpiries lists up to limit orders whose form lifetime or 3-D Secure
// challenge ended at or before now, after cursor, as DueSettlements does.
func (s *Store) DueExpiries(now int64, after ScheduleCursor, limit int) ([]OrderRef, ScheduleCursor, error) {
	return s.dueRefs(expiryIndex, now, after, limit)
}

// NextExpiry returns the earliest scheduled expiry, or 0.
func (s *Store) NextExpiry() (int64, error) { return s.firstTimed(expiryIndex) }

// putFormIndexes keeps the form token index, the challenge index and the
// expiry schedule in step with the order, in the order's own batch.
func (b *Batch) putFormIndexes(cur, next *order.Order) {
	if next.FormTokenHash != "" {
		fk := append([]byte(prefixForm), next.FormTokenHash...)
		switch {
		case cur == nil:
			b.putJSON(fk, &FormRecord{Merchant: next.Merchant, OrderID: next.ID})
		case cur.Status == order.StatusCreated && next.Status == order.StatusProcessing:
			b.putJSON(fk, &FormRecord{Merchant: next.Merchant, OrderID: next.ID, Consumed: true})
		}
	}
	c := challengeOf(next)
	newChallenge := c != "" && c != challengeOf(cur)
	var oldDue int64
	if cur != nil {
		oldDue = cur.ExpiresAt()
	}
	newDue := next.ExpiresAt()
	if !newChallenge && oldDue == newDue {
		return // most changes (every charge's): no reference to make
	}
	ref := refKey("", next.Merchant, next.ID)
	if newChallenge {
		b.set(append([]byte(prefixChallenge), SecretHash(c)...), ref)
	}
	if oldDue != newDue {
		if oldDue != 0 {
			b.del(timedKey(prefixExpiry, oldDue, ref))
		}
		if newDue != 0 {
			b.set(timedKey(prefixExpiry, newDue, ref), nil)
		}
	}
}

func challengeOf(o *order.Order) string {
	if o == nil || o.Pending == nil {
		return ""
	}
	return o.Pending.Challenge
}

// formSideEffects writes the sealed card a form payment brought, like a
// charge's create.
func (b *Batch) formSideEffects(cmd *order.Command, next *order.Order) {
	if cmd.Kind == order.KindFormSubmit && len(cmd.Submit.SealedCard) > 0 {
		b.set(append([]byte(prefixCard), next.Source.CardID...), cmd.Submit.SealedCard)
	}
}
