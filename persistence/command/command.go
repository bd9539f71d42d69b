package command

import "github.com/paygate/gateway/order"

// Cmd is one command of the replicated log. Exactly one field is set.
type Cmd struct {
	Order    *order.Command `json:"o,omitempty"`
	Merchant *Merchant      `json:"m,omitempty"`
	Notify   *NotifyUpdate  `json:"n,omitempty"`
	// NotifyPrune and IdemPrune remove what has outlived its retention
	// (persistence/retention.go).
	NotifyPrune *NotifyPrune `json:"np,omitempty"`
	IdemPrune   *IdemPrune   `json:"ip,omitempty"`
	// Member records a cluster member (persistence/members.go).
	Member *Member `json:"mb,omitempty"`
	// MerchantKeys rotates a merchant's key pair (persistence/merchant_keys.go).
	MerchantKeys *MerchantKeys `json:"mk,omitempty"`
	// VaultRewrap re-seals values under the current vault key
	// (persistence/rewrap.go).
	VaultRewrap *VaultRewrap `json:"vr,omitempty"`
	// ClusterCA and JoinToken are the cluster links' secrets
	// (persistence/clusterpki.go).
	ClusterCA *ClusterCA `json:"ca,omitempty"`
	JoinToken *JoinToken `json:"jt,omitempty"`
	// RequestHashKey records the key of the request hashes and form tokens
	// once (persistence/hashkey.go).
	RequestHashKey *RequestHashKey `json:"rk,omitempty"`
	// Audit appends a record to the audit log (persistence/audit.go).
	Audit *AuditRecord `json:"au,omitempty"`
	// Operator adds or disables a back-office operator, and Session starts
	// or ends an operator's session (persistence/operators.go).
	Operator *Operator `json:"op,omitempty"`
	Session  *Session  `json:"ss,omitempty"`
	// MID registers a processing MID (persistence/mids.go).
	MID *MID `json:"mi,omitempty"`
}

// Operator is a back-office operator (contract 13) as replicated. Its
// password is only an argon2id hash (a PHC string, transport/operator).
// Email is the key, lower-cased.
type Operator struct {
	Email        string `json:"email"`
	Role         string `json:"role"`
	PasswordHash string `json:"password_hash"`
	// CreatedAt and DisabledAt are Unix ns, decided by the leader.
	CreatedAt  int64 `json:"created_at"`
	DisabledAt int64 `json:"disabled_at,omitzero"`
	// Disable, in a command, disables the operator named by Email at
	// DisabledAt (the other fields are not read); the record is kept, so
	// the email keeps naming the same person in the audit log.
	Disable bool `json:"disable,omitempty"`
}

// Session is an operator's session: never its token, only the token's
// SHA-256 (hex). ExpiresAt (Unix ns) is decided by the leader at sign-in.
type Session struct {
	TokenHash string `json:"token_hash"`
	Email     string `json:"email"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
	// IdleUntil (Unix ns) is the idle deadline: the session is refused
	// from it on unless renewed before (PCI DSS 8.2.8). The leader sets it
	// at sign-in, never past ExpiresAt; 0 in a record written before idle
	// timeouts existed (such a session has only its absolute expiry).
	IdleUntil int64 `json:"idle_until,omitzero"`
	// End, in a command, ends the session of TokenHash (sign-out).
	End bool `json:"end,omitempty"`
	// Touch, in a command, renews the session of TokenHash: its idle
	// deadline becomes IdleUntil (decided by the node that proposes it),
	// capped at its ExpiresAt, never earlier than it was. The other fields
	// are not read; a session that has no record is not revived.
	Touch bool `json:"touch,omitzero"`
}

// MID is a processing MID (contract 12): the card acceptor id a merchant's
// orders name in processing_mid, the acquirer host that serves it, and the
// currencies it accepts (ISO 4217 alphabetic, upper case). RegisteredAt
// (Unix ns, the leader's clock, written into the log) tells which orders
// are its own: those created at or after it; an older order that named it
// keeps the default acquirer it was authorised by.
type MID struct {
	MID          string   `json:"mid"`
	MerchantID   string   `json:"merchant_id"`
	AcquirerAddr string   `json:"acquirer_addr"`
	Currencies   []string `json:"currencies"`
	RegisteredAt int64    `json:"registered_at"`
}

// ClusterCA is the cluster's certificate authority as replicated: the
// certificate in PEM and the private key sealed under the vault key.
type ClusterCA struct {
	CertPEM   string `json:"cert_pem"`
	SealedKey []byte `json:"sealed_key"`
}

// RequestHashKey is the key that keys the idempotency records' request
// hashes and the hosted-form tokens, sealed under the vault key. It does
// not rotate with the vault key: the hashes stored under it must keep
// matching (docs/security.md).
type RequestHashKey struct {
	SealedKey []byte `json:"sealed_key"`
}

// JoinToken is what the cluster keeps of a join token: never its secret,
// only the secret's SHA-256.
type JoinToken struct {
	ID         string `json:"id"`
	SecretHash string `json:"secret_hash"`
	// CreatedAt and ExpiresAt are Unix nanoseconds, decided by the leader.
	CreatedAt int64 `json:"created_at"`
	ExpiresAt int64 `json:"expires_at"`
}

// Merchant is a merchant account. Secrets are vault-sealed.
type Merchant struct {
	ID                  string `json:"id"`
	Name                string `json:"name,omitempty"`
	APIPublicKey        string `json:"api_public_key"`
	APISecretSealed     []byte `json:"api_secret_sealed"`
	WebhookPublicKey    string `json:"webhook_public_key"`
	WebhookSecretSealed []byte `json:"webhook_secret_sealed"`
	RateLimitRPS        int    `json:"rate_limit_rps"`
	CreatedAt           int64  `json:"created_at"`
	// The API pair a rotation replaced: it still signs requests until
	// PreviousAPIUntil (Unix ns, decided by the leader and written into
	// the log), and is refused after (contract section 14).
	PreviousAPIPublicKey    string `json:"previous_api_public_key,omitempty"`
	PreviousAPISecretSealed []byte `json:"previous_api_secret_sealed,omitempty"`
	PreviousAPIUntil        int64  `json:"previous_api_until,omitzero"`
}

// MerchantKeys replaces one of a merchant's key pairs (contract section
// 14). The leader makes the new pair and decides the end of the overlap
// from its own clock; both travel in the command, so every replica writes
// the same record at the same index and no replica reads a clock.
type MerchantKeys struct {
	MerchantID string `json:"id"`
	// Pair is "api" or "webhook".
	Pair string `json:"pair"`
	// Replaces is the pair's public key the rotation was made against: if
	// another rotation of the pair committed first, this one is refused
	// rather than silently dropping that one's keys.
	Replaces     string `json:"replaces"`
	PublicKey    string `json:"pk"`
	SecretSealed []byte `json:"sk_sealed"`
	// PreviousUntil (api only; Unix ns) is when the replaced API pair stops
	// signing requests: the rotation's log time plus the overlap.
	PreviousUntil int64 `json:"prev_until,omitzero"`
}

// VaultRewrap replaces sealed values (card blobs, merchant records) by
// their re-seal under the current vault key. Each entry applies only if
// the value is still the one the leader re-sealed (OldSum): a record that
// changed meanwhile is left for the next pass.
type VaultRewrap struct {
	Entries []RewrapEntry `json:"e"`
}

// RewrapEntry is one re-sealed value.
type RewrapEntry struct {
	Key    []byte `json:"k"`
	OldSum []byte `json:"o"` // SHA-256 of the value it replaces
	Value  []byte `json:"v"`
}

// Member is one node of the cluster as recorded in the log.
type Member struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
	// Removed deletes the record: the node left the cluster.
	Removed bool `json:"removed,omitempty"`
}

// AttemptRecord is one delivery attempt.
type AttemptRecord struct {
	At         int64  `json:"at"`
	HTTPCode   int    `json:"http_code,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationNs int64  `json:"duration_ns"`
}

// NotifyUpdate is a replicated change to a notification: an attempt's
// result with the next due time decided by the leader, or a redelivery.
type NotifyUpdate struct {
	ID        string         `json:"id"`
	Time      int64          `json:"t"`
	Attempt   *AttemptRecord `json:"attempt,omitempty"`
	Delivered bool           `json:"delivered,omitempty"`
	// NextDueAt is the next attempt's time; 0 with !Delivered marks the
	// delivery failed (the schedule is exhausted).
	NextDueAt int64 `json:"next_due_at,omitempty"`
	// Redeliver restarts delivery now with a fresh schedule (operator).
	Redeliver bool `json:"redeliver,omitempty"`
}

// NotifyPrune removes finished notifications past their retention. Each
// is named by its retention entry: the FSM removes a notification only if
// that entry is still there (a redelivery deletes it, and a second finish
// writes another), which costs a read of the small, time-ordered x/ keys
// instead of each notification's record.
type NotifyPrune struct {
	// Before is the retention cut: notifications finished before it go.
	Before  int64          `json:"before"`
	Entries []NotifyExpiry `json:"entries"`
}

// NotifyExpiry is a finished notification's retention entry.
type NotifyExpiry struct {
	ID         string `json:"i"`
	FinishedAt int64  `json:"t"`
}

// IdemPrune removes idempotency records written before Before, each named
// by its age entry as NotifyPrune names notifications. The leader sets
// Before a margin earlier than order.IdempotencyWindow ago by its clock, so that
// no leader, whatever its clock, can still replay a removed record.
type IdemPrune struct {
	Before  int64        `json:"before"`
	Entries []IdemExpiry `json:"entries"`
}

// IdemExpiry is an idempotency record's age entry: a merchant's key and
// when its record was written.
type IdemExpiry struct {
	Merchant  string `json:"m"`
	Key       string `json:"k"`
	CreatedAt int64  `json:"t"`
}
