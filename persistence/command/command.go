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
	// ClusterCA and JoinToken are the cluster links' secrets
	// (persistence/clusterpki.go).
	ClusterCA *ClusterCA `json:"ca,omitempty"`
	JoinToken *JoinToken `json:"jt,omitempty"`
	// Audit appends a record to the audit log (persistence/audit.go).
	Audit *AuditRecord `json:"au,omitempty"`
}

// ClusterCA is the cluster's certificate authority as replicated: the
// certificate in PEM and the private key sealed under the vault key.
type ClusterCA struct {
	CertPEM   string `json:"cert_pem"`
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
