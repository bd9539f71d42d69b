package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/persistence/command"
)

// The audit log (contract 13): a hash chain of records of what operators
// did, replicated like every other state. The leader decides a record's
// seq, at and prev_hash from its applied state and proposes it whole; the
// FSM writes it only if it extends the chain it holds (seq one more than
// the last, prev_hash the last one's hash, hash right), so two records
// proposed at once cannot both take a number: the one applied second is
// refused with ErrAuditOutOfOrder and its proposer decides again.
const (
	prefixAudit     = "l/" // l/<seq BE> → AuditRecord JSON
	prefixAuditHead = "h/" // h/audit → the last record's seq and hash
)

var keyAuditHead = []byte(prefixAuditHead + "audit")

// AuditRecord is one entry of the audit log (its format: package command).
type AuditRecord = command.AuditRecord

// AuditGenesis is the first record's prev_hash.
var AuditGenesis = command.AuditGenesis

// AuditHead is where the chain ends: the last record's seq and hash (0 and
// AuditGenesis when the log is empty).
type AuditHead struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// Next fills in rec's seq, prev_hash and hash as the record after h.
func (h AuditHead) Next(rec AuditRecord) AuditRecord {
	rec.Seq, rec.PrevHash = h.Seq+1, h.Hash
	rec.Hash = rec.ComputeHash()
	return rec
}

// ErrAuditOutOfOrder is a proposed record that does not extend the chain.
var ErrAuditOutOfOrder = errors.New("audit record does not extend the chain")

// AuditHead reads the end of the chain.
func (s *Store) AuditHead() (AuditHead, error) { return auditHead(s.db) }

func auditHead(r reader) (AuditHead, error) {
	h, err := getJSON[AuditHead](r, keyAuditHead)
	if err != nil || h == nil {
		return AuditHead{Hash: AuditGenesis}, err
	}
	return *h, nil
}

func auditKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixAudit), seq)
}

func (b *Batch) applyAudit(rec *AuditRecord) Result {
	head, err := auditHead(b)
	if err != nil {
		panic(fmt.Sprintf("persistence: read audit head: %v", err))
	}
	if rec.Seq != head.Seq+1 || rec.PrevHash != head.Hash || rec.Hash != rec.ComputeHash() {
		return Result{Err: ErrAuditOutOfOrder}
	}
	b.putJSON(auditKey(rec.Seq), rec)
	b.putJSON(keyAuditHead, AuditHead{Seq: rec.Seq, Hash: rec.Hash})
	return Result{}
}

// AuditRecords lists up to limit records after seq after, in order, and
// whether more follow.
func (s *Store) AuditRecords(after uint64, limit int) ([]AuditRecord, bool, error) {
	var out []AuditRecord
	more := false
	var derr error
	err := s.scan(auditKey(after+1), prefixEnd(prefixAudit), func(_, v []byte) bool {
		if len(out) == limit {
			more = true
			return false
		}
		var rec AuditRecord
		if derr = json.Unmarshal(v, &rec); derr != nil {
			return false
		}
		out = append(out, rec)
		return true
	})
	if err == nil {
		err = derr
	}
	return out, more, err
}

// VerifyAuditChain checks records, which follow the record whose hash is
// prev (AuditGenesis for the first): each one's seq follows, its prev_hash
// is the previous hash, and its hash is right. It returns the first broken
// record's seq and what is wrong, or 0 and nil.
func VerifyAuditChain(prev string, prevSeq uint64, records []AuditRecord) (uint64, error) {
	for i := range records {
		r := &records[i]
		switch {
		case r.Seq != prevSeq+1:
			return r.Seq, fmt.Errorf("record %d follows record %d: a record is missing or out of order", r.Seq, prevSeq)
		case r.PrevHash != prev:
			return r.Seq, fmt.Errorf("record %d: prev_hash %s is not record %d's hash %s", r.Seq, r.PrevHash, prevSeq, prev)
		case r.Hash != r.ComputeHash():
			return r.Seq, fmt.Errorf("record %d: hash %s does not match its fields (they hash to %s)", r.Seq, r.Hash, r.ComputeHash())
		}
		prev, prevSeq = r.Hash, r.Seq
	}
	return 0, nil
}
