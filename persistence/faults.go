package persistence

import "time"

// Fault injection for the tests of other packages (cluster's replay tests):
// what a process kill leaves behind, which a clean Close never does.

// SetPendingCheckpointEvery changes how often a batch checkpoints the
// pending-authorisation set (pending.go). Call it before the first batch.
func (s *Store) SetPendingCheckpointEvery(d time.Duration) {
	s.pending.mu.Lock()
	defer s.pending.mu.Unlock()
	s.pending.every = d
}

// CloseAsKilled closes the store the way a killed process leaves it: every
// committed batch is in Pebble's files (the OS kept them), but the
// pending-authorisation set's changes since its last checkpoint were only
// in memory.
func (s *Store) CloseAsKilled() error { return s.closeDB() }
