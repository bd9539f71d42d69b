package cluster

import (
	"io"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// StateMachine is what the FSM applies the log to: the FSM decodes, skips
// and orders entries; the StateMachine keeps their effects. A node's is its
// Pebble store (StoreState); the tests of the Raft plumbing use an
// in-memory one (memstate_test.go), so they run without Pebble. It is the
// seam of hashicorp/raft's fuzzy tests and etcd's raftexample: raft never
// sees the store.
//
// Concurrency: Begin and the Batch it returns, Recheck, SyncForSnapshot,
// NewSnapshot, Restore and RestoreIncomplete are called from one goroutine
// at a time (raft's FSM goroutine, or Start before raft runs). A
// StateSnapshot's Write runs beside later batches. The readers (AppliedIndex,
// PendingExactAt, Member, Members, Digest) may be called from any goroutine.
//
// Storage failures are fatal: a Batch that cannot write panics or returns
// the error from Commit, and the FSM stops the node rather than let it
// diverge from the replicas that could (persistence/DESIGN.md).
type StateMachine interface {
	// AppliedIndex is the last log index whose effects the state holds.
	AppliedIndex() (uint64, error)
	// PendingExactAt is the index up to which the state's in-memory view of
	// pending work is exact; the orders of replayed entries after it are
	// handed to Recheck (persistence/DESIGN.md, "The pending-authorisation
	// set"). A state that keeps nothing apart returns AppliedIndex.
	PendingExactAt() uint64
	Recheck(replayed []persistence.OrderRef) error
	// Begin starts the batch of one call of raft's ApplyBatch.
	Begin() Batch
	// SyncForSnapshot makes everything applied durable: once raft compacts
	// the log up to a snapshot, the state is the only copy.
	SyncForSnapshot() error
	NewSnapshot() StateSnapshot
	// Restore replaces the whole state by a snapshot stream;
	// RestoreIncomplete reports one cut off by a crash.
	Restore(r io.Reader) error
	RestoreIncomplete() (bool, error)
	// SnapshotAppliedIndex reads the applied index a snapshot stream holds
	// without restoring it.
	SnapshotAppliedIndex(r io.Reader) (uint64, error)
	Member(id string) (*command.Member, error)
	Members() ([]command.Member, error)
	// Digest is a hash of the replicated state, equal on replicas at the
	// same applied index.
	Digest() (digest string, applied uint64, err error)
}

// Batch applies the commands of one raft batch and commits them at once.
type Batch interface {
	Apply(c *command.Cmd) persistence.Result
	// Commit makes the batch's effects the state at appliedIndex.
	Commit(appliedIndex uint64) error
	// Created lists the notifications the batch put in the outbox.
	Created() []*outbox.Notification
	Close()
}

// StateSnapshot is a point-in-time view of the state, streamed to a file or
// a follower.
type StateSnapshot interface {
	Write(w io.Writer) error
	Release()
}

// StoreState is the node's StateMachine: the Pebble store.
func StoreState(s *persistence.Store) StateMachine { return storeState{s} }

type storeState struct{ *persistence.Store }

func (s storeState) Begin() Batch { return storeBatch{s.NewBatch()} }

func (s storeState) NewSnapshot() StateSnapshot { return s.Store.NewSnapshot() }

func (storeState) SnapshotAppliedIndex(r io.Reader) (uint64, error) {
	return persistence.SnapshotAppliedIndex(r)
}

type storeBatch struct{ *persistence.Batch }

func (b storeBatch) Created() []*outbox.Notification { return b.Batch.Created }
