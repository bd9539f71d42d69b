package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// repairSealedTail finishes a segment rotation of the raft log that the
// process did not live to finish, so that raftwal.Open (v0.4.1) can append
// again. It must run before raftwal.Open, which holds wal-meta.db's lock.
//
// raft-wal rotates in two steps: the append that fills a segment writes its
// index block and fsyncs it (the file is now sealed), then a background
// goroutine records the seal in wal-meta.db and creates the next segment.
// A kill between the two (or a Close racing the goroutine, which raft-wal
// then skips on purpose) leaves wal-meta.db naming the sealed file as the
// live tail. raftwal.Open recovers it as the tail without finishing the
// rotation, and every later append fails with raftwal.ErrSealed: the node
// can read its log but never commit again.
//
// The repair does in wal-meta.db what the rotation would have done: it marks
// the tail sealed (SealTime, MaxIndex, IndexStart from the file) and adds
// the next segment, empty, after it. The file of that segment does not exist
// yet; raftwal.Open creates it (the crash it handles itself, a meta commit
// whose file was never created). It changes nothing, and returns false, in
// every other case: no wal-meta.db yet, no segments, a sealed tail in the
// meta, a missing tail file, a tail file that is not sealed.
//
// Before committing, every entry is read back through the on-disk index
// block (as raft-wal reads sealed segments) and compared with the entry the
// file scan found. A seal whose index block does not match (only a torn
// final write could do that) is an error: the node refuses to start rather
// than serve entries from a bad index.
func repairSealedTail(dir string, segmentSize int, logger *slog.Logger) (repaired bool, err error) {
	// Load would create wal-meta.db in a new directory; leave that to
	// raftwal.Open.
	if _, err := os.Stat(filepath.Join(dir, metadb.FileName)); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	// raftwal.Open's default meta store (applyDefaultsAndValidate).
	meta := &metadb.BoltMetaDB{}
	defer func() {
		if cerr := meta.Close(); cerr != nil && err == nil {
			repaired, err = false, fmt.Errorf("close %s: %w", metadb.FileName, cerr)
		}
	}()
	state, err := meta.Load(dir)
	if err != nil {
		return false, err
	}
	if len(state.Segments) == 0 {
		return false, nil
	}
	last := len(state.Segments) - 1
	tail := state.Segments[last]
	if !tail.SealTime.IsZero() || tail.Codec != raftwal.CodecBinaryV1 {
		// Sealed: nothing to finish. Another codec: raftwal.Open rejects it.
		return false, nil
	}

	// raftwal.Open's default segment filer.
	filer := segment.NewFiler(dir, fs.New())
	w, err := filer.RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recover the raft log's tail segment %s: %w", segment.FileName(tail), err)
	}
	defer w.Close()
	sealed, indexStart, err := w.Sealed()
	if err != nil || !sealed {
		return false, err
	}
	lastIndex := w.LastIndex()
	if lastIndex == 0 || lastIndex < tail.MinIndex {
		return false, fmt.Errorf("raft log segment %s is sealed on disk but holds no entries from %d (last %d)",
			segment.FileName(tail), tail.MinIndex, lastIndex)
	}

	// As rotateSegmentLocked does.
	now := time.Now()
	tail.SealTime = now
	tail.MaxIndex = lastIndex
	tail.IndexStart = indexStart
	if err := checkSealedSegment(filer, w, tail); err != nil {
		return false, fmt.Errorf("raft log segment %s is sealed on disk, but %w", segment.FileName(tail), err)
	}
	// As createNextSegment and newSegment do.
	next := types.SegmentInfo{
		ID:         state.NextSegmentID,
		BaseIndex:  tail.MaxIndex + 1,
		MinIndex:   tail.MaxIndex + 1,
		SizeLimit:  uint32(segmentSize),
		Codec:      raftwal.CodecBinaryV1,
		CreateTime: now,
	}
	state.Segments[last] = tail
	state.Segments = append(state.Segments, next)
	state.NextSegmentID++
	if err := meta.CommitState(state); err != nil {
		return false, fmt.Errorf("record the raft log's segment seal: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("raft log: finished a segment rotation interrupted by a crash or shutdown",
		"dir", dir, "sealed_segment", segment.FileName(tail), "last_index", tail.MaxIndex,
		"next_segment", segment.FileName(next))
	return true, nil
}

// checkSealedSegment reads every entry of info through its on-disk index
// block, as raft-wal will once info is in the meta, and compares it with the
// entry the recovery scan of the same file found.
func checkSealedSegment(filer *segment.Filer, scanned types.SegmentReader, info types.SegmentInfo) error {
	r, err := filer.Open(info)
	if err != nil {
		return fmt.Errorf("cannot be opened sealed: %w", err)
	}
	defer r.Close()
	for idx := info.MinIndex; idx <= info.MaxIndex; idx++ {
		want, err := scanned.GetLog(idx)
		if err != nil {
			return fmt.Errorf("entry %d cannot be read: %w", idx, err)
		}
		got, err := r.GetLog(idx)
		if err != nil {
			want.Close()
			return fmt.Errorf("entry %d cannot be read through its index block: %w", idx, err)
		}
		same := bytes.Equal(got.Bs, want.Bs)
		got.Close()
		want.Close()
		if !same {
			return fmt.Errorf("its index block disagrees with entry %d", idx)
		}
	}
	return nil
}
