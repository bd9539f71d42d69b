package command

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// AuditRecord is one entry of the audit log (contract 13), proposed whole by
// the leader (persistence/audit.go checks that it extends the chain). At is
// RFC 3339 (UTC, with nanoseconds) as the leader's clock read it.
type AuditRecord struct {
	Seq      uint64 `json:"seq"`
	At       string `json:"at"`
	Actor    string `json:"actor"`
	Action   string `json:"action"`
	Target   string `json:"target"`
	SourceIP string `json:"source_ip"`
	Result   string `json:"result"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// AuditGenesis is the first record's prev_hash.
var AuditGenesis = strings.Repeat("0", 64)

// ComputeHash is the lowercase hex SHA-256 of seq, at, actor, action,
// target, source_ip, result and prev_hash, joined by "\n".
func (r *AuditRecord) ComputeHash() string {
	s := strings.Join([]string{strconv.FormatUint(r.Seq, 10), r.At, r.Actor, r.Action, r.Target,
		r.SourceIP, r.Result, r.PrevHash}, "\n")
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
