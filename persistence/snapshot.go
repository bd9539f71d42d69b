package persistence

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
)

// Snapshot format: a stream of records (uvarint key length, key, uvarint
// value length, value), ending with a zero key length. It is taken from a
// Pebble snapshot, so it is one consistent point in the applied log.

// snapshotBatchBytesMax bounds the size of each batch written on restore.
const snapshotBatchBytesMax = 4 << 20

// Snapshot is a consistent read view for streaming to a follower.
type Snapshot struct {
	snap *pebble.Snapshot
}

// NewSnapshot captures the current state. Call it from the FSM goroutine
// (between batches); Write may run concurrently with later applies.
func (s *Store) NewSnapshot() *Snapshot {
	return &Snapshot{snap: s.db.NewSnapshot()}
}

// Write streams the snapshot.
func (sn *Snapshot) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	it, err := sn.snap.NewIter(nil)
	if err != nil {
		return err
	}
	var rw recordWriter
	put := func(b []byte) error { return rw.put(bw, b) }
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) == 0 || bytes.Equal(k, keyRestoring) {
			continue
		}
		// The first failed write ends the snapshot: reading the rest of
		// the store for nothing would delay a shutdown that stopped it.
		if err := put(k); err != nil {
			it.Close()
			return err
		}
		if err := put(v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	rw.put(bw, nil) // the end: a zero key length; a failed write shows in Flush
	return bw.Flush()
}

// Release frees the snapshot.
func (sn *Snapshot) Release() { sn.snap.Close() }

// keyRestoring marks a restore in progress. It is set in the same synced
// batch that clears the state and removed in the last synced batch, so a
// store that holds it was cut off mid-restore and must be restored again
// (cluster.Start does so from raft's latest snapshot).
var keyRestoring = []byte(prefixMeta + "restoring")

// RestoreIncomplete reports whether a restore was interrupted.
func (s *Store) RestoreIncomplete() (bool, error) {
	v, err := get(s.db, keyRestoring)
	return v != nil, err
}

// Restore replaces the whole state with a snapshot stream and syncs it.
func (s *Store) Restore(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	// Every cached order is about to be replaced, and the filter of order
	// keys is rebuilt once the new state is in.
	s.orders.clear()
	defer s.orders.clear()
	// Not cleared again at the end, unlike the order cache: the warm-up
	// that loadKnownOrders starts below fills it, and a clear would end it.
	s.history.clear()
	s.fsm.forget()
	s.known.Store(nil)
	// The snapshot's schedules may start anywhere; so may scans, from now on.
	defer s.resetTimed()
	batch := s.db.NewBatch()
	defer func() { batch.Close() }()
	if err := batch.DeleteRange([]byte{0}, []byte{0xff, 0xff, 0xff, 0xff}, nil); err != nil {
		return fmt.Errorf("clear state: %w", err)
	}
	if err := batch.Set(keyRestoring, []byte{1}, nil); err != nil {
		return err
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("clear state: %w", err)
	}
	batch.Close()
	batch = s.db.NewBatch()
	for {
		k, v, err := readRecord(br)
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		if err := batch.Set(k, v, nil); err != nil {
			return err
		}
		if batch.Len() >= snapshotBatchBytesMax {
			if err := batch.Commit(pebble.NoSync); err != nil {
				return err
			}
			batch.Close()
			batch = s.db.NewBatch()
		}
	}
	if err := batch.Delete(keyRestoring, nil); err != nil {
		return err
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return err
	}
	// A snapshot of a store older than the search indexes has none.
	if err := s.ensureSearchIndex(); err != nil {
		return err
	}
	if err := s.loadMIDs(); err != nil {
		return err
	}
	s.loadKnownOrders()
	return s.pending.load(s)
}

// SnapshotAppliedIndex reads the last applied raft index a snapshot stream
// holds (0 if none), without restoring it: the store's meta keys sort first,
// so only the first few records are read.
func SnapshotAppliedIndex(r io.Reader) (uint64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		k, v, err := readRecord(br)
		if err != nil || k == nil {
			return 0, err
		}
		switch c := bytes.Compare(k, keyApplied); {
		case c == 0 && len(v) != 8:
			return 0, fmt.Errorf("read snapshot: an applied index of %d bytes", len(v))
		case c == 0:
			return binary.BigEndian.Uint64(v), nil
		case c > 0:
			return 0, nil
		}
	}
}

// readRecord reads one key and value of a snapshot stream; a nil key is the
// stream's end.
func readRecord(br *bufio.Reader) (k, v []byte, err error) {
	kl, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, nil, fmt.Errorf("read snapshot: %w", err)
	}
	if kl == 0 {
		return nil, nil, nil
	}
	if k, err = readN(br, kl); err != nil {
		return nil, nil, err
	}
	vl, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, nil, fmt.Errorf("read snapshot: %w", err)
	}
	if v, err = readN(br, vl); err != nil {
		return nil, nil, err
	}
	return k, v, nil
}

func readN(r io.Reader, n uint64) ([]byte, error) {
	if n > 64<<20 {
		return nil, errors.New("read snapshot: record too large")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return b, nil
}

// CopyForNewCluster copies a snapshot stream, leaving out the member
// records (n/): a backup restored as a new cluster starts with the
// restoring node alone, and the records of the old cluster's nodes would
// show as members half added. Each node records itself again.
func CopyForNewCluster(w io.Writer, r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	bw := bufio.NewWriterSize(w, 1<<20)
	var rw recordWriter
	for {
		k, v, err := readRecord(br)
		if err != nil {
			return err
		}
		if k == nil {
			break
		}
		if bytes.HasPrefix(k, []byte(prefixMember)) {
			continue
		}
		if err := rw.put(bw, k); err != nil {
			return err
		}
		if err := rw.put(bw, v); err != nil {
			return err
		}
	}
	if err := rw.put(bw, nil); err != nil { // the end: a zero key length
		return err
	}
	return bw.Flush()
}

// recordWriter writes the length-prefixed parts of a snapshot stream.
type recordWriter struct{ lenBuf [binary.MaxVarintLen64]byte }

func (r *recordWriter) put(bw *bufio.Writer, b []byte) error {
	_, err := bw.Write(r.lenBuf[:binary.PutUvarint(r.lenBuf[:], uint64(len(b)))])
	if err == nil && len(b) > 0 {
		_, err = bw.Write(b)
	}
	return err
}
