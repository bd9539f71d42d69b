// Package persistencetest gives tests of the packages above storage a
// replicated log without a cluster: Log applies each proposed command to a
// real store at once, in order, as the FSM does once Raft has committed it.
// The order actors' and the webhook dispatcher's tests use it; nothing else
// may (internal/depcheck).
package persistencetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// Log is an in-memory stand-in for the Raft log in front of store. Its zero
// value is not usable: make it with NewLog.
type Log struct {
	mu     sync.Mutex
	store  *persistence.Store
	index  uint64
	closed bool
	count  atomic.Int64
}

// NewLog returns a log that applies to store.
func NewLog(store *persistence.Store) *Log { return &Log{store: store} }

// Propose applies cmd in a batch of its own and commits it at the next
// index, as the FSM applies a committed entry.
func (l *Log) Propose(_ context.Context, cmd *command.Cmd) (persistence.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return persistence.Result{}, errors.New("store closed")
	}
	b := l.store.NewBatch()
	defer b.Close()
	res := b.Apply(cmd)
	l.index++
	if err := b.Commit(l.index); err != nil {
		return persistence.Result{}, err
	}
	l.count.Add(1)
	return res, nil
}

// Applied counts the commands applied so far.
func (l *Log) Applied() int64 { return l.count.Load() }

// CloseStore makes every later Propose fail and then closes the store, as a
// node closes its store once raft has stopped; a proposal under way ends
// first.
func (l *Log) CloseStore() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return l.store.Close()
}
