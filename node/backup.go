package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/cluster"
	"github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/cluster/pki"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/backup"
)

// Backup file names in --backup-dir: backup-<UTC time>-<applied index>.pgbak.
// The time sorts them, so the oldest go first when --backup-keep is passed.
const (
	backupPrefix = "backup-"
	backupSuffix = ".pgbak"
)

var (
	backupLastSuccess = metrics.GetOrCreateGauge(`gateway_backup_last_success_timestamp_seconds`, nil)
	backupFailures    = metrics.GetOrCreateCounter(`gateway_backup_failures_total`)
	// backupInterval is --backup-interval in seconds, 0 without
	// --backup-dir: an alert compares the last success's age with it.
	backupInterval = metrics.GetOrCreateGauge(`gateway_backup_interval_seconds`, nil)
)

// firstBackupAfterMax bounds the wait for a node's first scheduled backup:
// with a long interval, a restarted node would otherwise look stale (its
// last success reads 0) for a whole interval.
const firstBackupAfterMax = time.Minute

// restoreFrom seeds an empty data dir from a backup file (--restore): the
// file is verified whole (trailer, length, checksum) before anything is
// written, and a data dir that holds anything is refused.
func restoreFrom(cfg Config, file string) (backup.Header, error) {
	hdr, stream, err := backup.OpenFile(file)
	if err != nil {
		return backup.Header{}, fmt.Errorf("--restore %s: %w", file, err)
	}
	defer stream.Close()
	err = cluster.SeedFromBackup(cluster.Config{NodeID: cfg.NodeID, RaftAddr: cfg.RaftAddr, DataDir: cfg.DataDir, RaftLogDir: cfg.RaftLogDir}, hdr, stream)
	if err != nil {
		return backup.Header{}, fmt.Errorf("--restore %s: %w", file, err)
	}
	return hdr, nil
}

// scheduledBackups writes a backup to --backup-dir every --backup-interval
// and keeps the newest --backup-keep. Every node backs up its own state; a
// failed backup is logged and counted, and the next interval tries again.
func (n *Node) scheduledBackups() {
	defer n.bg.Done()
	backupInterval.Set(n.cfg.BackupInterval.Seconds())
	wait := min(n.cfg.BackupInterval, firstBackupAfterMax)
	for {
		select {
		case <-n.stopLeader:
			return
		case <-time.After(wait):
		}
		wait = n.cfg.BackupInterval
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.BackupInterval)
		path, err := n.backupToDir(ctx)
		cancel()
		if err != nil {
			backupFailures.Inc()
			n.logger.Error("scheduled backup failed", "dir", n.cfg.BackupDir, "error", err)
			continue
		}
		n.logger.Info("scheduled backup written", "file", path)
		if err := pruneBackups(n.cfg.BackupDir, n.cfg.BackupKeep); err != nil {
			n.logger.Warn("prune old backups", "dir", n.cfg.BackupDir, "error", err)
		}
	}
}

// backupToDir writes one backup into --backup-dir, atomically.
func (n *Node) backupToDir(ctx context.Context) (string, error) {
	if err := os.MkdirAll(n.cfg.BackupDir, 0o700); err != nil {
		return "", err
	}
	var name string
	tmp := filepath.Join(n.cfg.BackupDir, ".next"+backupSuffix)
	_, _, err := backup.WriteFileAtomic(tmp, func(w io.Writer) error {
		hdr, _, err := n.raft.Backup(ctx, w)
		name = fmt.Sprintf("%s%s-%d%s", backupPrefix, hdr.CreatedAt.Format("20060102T150405.000Z"), hdr.AppliedIndex, backupSuffix)
		return err
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(n.cfg.BackupDir, name)
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	backupLastSuccess.Set(float64(time.Now().Unix()))
	return path, nil
}

// pruneBackups removes all but the newest keep backups of dir.
func pruneBackups(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, backupPrefix) && strings.HasSuffix(n, backupSuffix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for len(names) > keep {
		if err := os.Remove(filepath.Join(dir, names[0])); err != nil {
			return err
		}
		names = names[1:]
	}
	return nil
}

// restoreStore loads the backup into the store the node just opened, so
// that what the node does before raft starts (its cluster identity, below)
// sees the restored state; raft's copy (restoreFrom) then finds the store
// whole and is not restored again.
func (n *Node) restoreStore(file string) error {
	_, stream, err := backup.OpenFile(file)
	if err != nil {
		return err
	}
	defer stream.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(persistence.CopyForNewCluster(pw, stream)) }()
	err = n.store.Restore(pr)
	pr.CloseWithError(err)
	return err
}

// restoredIdentity gives a node restored from a backup the cluster CA the
// backup holds (replicated, its key sealed under the vault key), so the
// certificates of the backed-up cluster's tooling stay valid, and issues it
// a node certificate. A backup without one (a cluster with operator
// certificates or insecure links) starts a CA of its own, as a new cluster.
func (n *Node) restoredIdentity(dir string) (*link.TLS, error) {
	rec, err := n.store.ClusterCA()
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return n.bootstrapIdentity(dir)
	}
	cert, err := pki.ParseCert([]byte(rec.CertPEM))
	if err != nil {
		return nil, fmt.Errorf("the backup's cluster CA: %w", err)
	}
	keyPEM, err := n.vault.Open(rec.SealedKey, caKeyAAD)
	if err != nil {
		return nil, fmt.Errorf("open the backup's cluster CA key (is --vault-key-file the backed-up cluster's?): %w", err)
	}
	key, err := pki.ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	ca := &pki.CA{Cert: cert, Key: key}
	nodeCert, nodeKey, err := ca.NewNode(n.cfg.NodeID, pki.HostsOf(n.cfg.AdvertiseRaftAddr))
	if err != nil {
		return nil, err
	}
	if err := pki.WriteCA(dir, ca, false); err != nil {
		return nil, err
	}
	if err := pki.WriteNode(dir, nodeCert, nodeKey, false); err != nil {
		return nil, err
	}
	n.logger.Info("restored the backup's cluster CA and issued this node's certificate", "dir", dir, "ca_fingerprint", ca.Fingerprint())
	n.pki = &clusterPKI{ca: ca, store: n.store, open: n.vault.Open}
	return loadNodeTLSFrom(ca, dir)
}
