package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/backup"
)

// Backup writes a consistent copy of the store to w in the backup format
// (persistence/backup) while the node keeps serving; see OpenBackup.
func (n *Node) Backup(ctx context.Context, w io.Writer) (backup.Header, string, error) {
	v, err := n.OpenBackup(ctx)
	if err != nil {
		return backup.Header{}, "", err
	}
	defer v.Release()
	sum, err := v.Write(w)
	return v.Header, sum, err
}

// BackupView is a consistent view of the store, ready to be written as a
// backup. Release it when done.
type BackupView struct {
	Header backup.Header
	snap   StateSnapshot
}

// OpenBackup takes the view a backup is written from: a Pebble snapshot
// taken between two FSM batches, after the pending-authorisation set was
// checkpointed into the store, as for raft's own snapshots. The node keeps
// applying while the view is written.
//
// On the leader it first passes the read barrier, so every change
// acknowledged before the call is in the view. A follower's view holds
// what it has applied, at least up to the commit index it knew when asked
// (which trails the leader's by about a heartbeat).
func (n *Node) OpenBackup(ctx context.Context) (*BackupView, error) {
	if n.IsLeader() {
		if err := n.ReadBarrier(ctx); err != nil {
			return nil, err
		}
	} else if commit := n.Raft.CommitIndex(); !n.CaughtUp(ctx, commit) {
		return nil, fmt.Errorf("%w: this follower has not applied the log up to index %d", ErrNoLeader, commit)
	}
	f := n.FSM
	f.between.Lock()
	if err := f.store.SyncForSnapshot(); err != nil {
		f.between.Unlock()
		return nil, fmt.Errorf("sync store before backup: %w", err)
	}
	snap := f.store.NewSnapshot()
	applied := f.applied.Load()
	f.between.Unlock()

	hdr := backup.Header{AppliedIndex: applied, Term: n.Raft.CurrentTerm(), NodeID: n.cfg.NodeID, CreatedAt: time.Now().UTC()}
	if fut := n.Raft.GetConfiguration(); fut.Error() == nil {
		for _, s := range fut.Configuration().Servers {
			hdr.Configuration = append(hdr.Configuration, backup.Server{ID: string(s.ID), Address: string(s.Address), Suffrage: s.Suffrage.String()})
		}
	}
	return &BackupView{Header: hdr, snap: snap}, nil
}

// Write writes the backup and returns its checksum (hex).
func (v *BackupView) Write(w io.Writer) (string, error) {
	bw, err := backup.NewWriter(w, v.Header)
	if err != nil {
		return "", err
	}
	if err := v.snap.Write(bw); err != nil {
		return "", err
	}
	return bw.Finish()
}

// Release frees the view's snapshot.
func (v *BackupView) Release() { v.snap.Release() }

// ErrDataDirNotEmpty refuses a restore over existing state.
var ErrDataDirNotEmpty = errors.New("restore: the data dir already holds state; restore only into an empty --data-dir (and --raft-log-dir)")

// SeedFromBackup prepares an empty data dir to start as a single-node
// cluster holding a backup's state: the backup's stream becomes raft's
// latest snapshot, at the backup's applied index, with a configuration of
// this node alone. Start then restores the store from it (recoverStore)
// and raft carries on from that index, so the entries the cluster appends
// next follow the restored state; nodes that join are sent the snapshot.
func SeedFromBackup(cfg Config, hdr backup.Header, stream io.Reader) error {
	dir := filepath.Join(cfg.DataDir, "raft")
	logDir := cfg.RaftLogDir
	if logDir == "" {
		logDir = filepath.Join(dir, "wal")
	}
	for _, d := range []string{cfg.DataDir, logDir} {
		if !emptyDir(d) {
			return fmt.Errorf("%w (%s is not empty)", ErrDataDirNotEmpty, d)
		}
	}
	if hdr.AppliedIndex == 0 {
		return errors.New("restore: the backup holds no applied index")
	}
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return err
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: io.Discard})
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hlog)
	if err != nil {
		return err
	}
	// The term only has to be at least the one raft will record for the
	// snapshot: nothing of the old cluster's terms matters to a new one.
	const term = 1
	conf := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(cfg.NodeID), Address: raft.ServerAddress(cfg.RaftAddr),
	}}}
	// The transport only encodes the (legacy) peer list of the snapshot's
	// metadata; the TCP transport encodes an address as itself, as this one does.
	_, peers := raft.NewInmemTransport(raft.ServerAddress(cfg.RaftAddr))
	defer peers.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, hdr.AppliedIndex, term, conf, hdr.AppliedIndex, peers)
	if err != nil {
		return err
	}
	if err := persistence.CopyForNewCluster(sink, stream); err != nil {
		sink.Cancel()
		return fmt.Errorf("restore: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	wal, err := raftwal.Open(logDir)
	if err != nil {
		return err
	}
	defer wal.Close()
	return wal.SetUint64([]byte("CurrentTerm"), term)
}

// emptyDir reports whether d is missing or holds nothing.
func emptyDir(d string) bool {
	entries, err := os.ReadDir(d)
	return (err != nil && os.IsNotExist(err)) || (err == nil && len(entries) == 0)
}
