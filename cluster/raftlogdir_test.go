package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// startAlone starts a single-voter node on dataDir's store with its raft
// log in logDir; it returns Start's error instead of failing.
func startAlone(t *testing.T, dataDir, logDir string) (*Node, *persistence.Store, error) {
	t.Helper()
	return startAloneWith(t, dataDir, logDir, func(*Config) {})
}

// startAloneWith is startAlone with a change to the node's Config.
func startAloneWith(t *testing.T, dataDir, logDir string, change func(*Config)) (*Node, *persistence.Store, error) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(filepath.Join(dataDir, "state"), logger)
	if err != nil {
		t.Fatal(err)
	}
	fsm, err := NewFSM(StoreState(store), logger)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("inmem-alone")
	cfg := Config{
		NodeID: "n1", RaftAddr: "inmem-alone", DataDir: dataDir, RaftLogDir: logDir, Bootstrap: true,
		Logger: logger, HeartbeatTimeout: hbTimeout, ElectionTimeout: electTimeout,
		Transport: trans, RaftLogOutput: io.Discard,
	}
	change(&cfg)
	node, err := Start(cfg, fsm)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return node, store, nil
}

func waitLeaderAlone(t *testing.T, node *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !node.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stopAlone(t *testing.T, node *Node, store *persistence.Store) {
	t.Helper()
	if err := node.Shutdown(); err != nil {
		t.Error(err)
	}
	if err := store.Close(); err != nil {
		t.Error(err)
	}
}

// The raft log can live apart from the data dir (--raft-log-dir), and a
// store started against a folder without its raft log refuses to start
// rather than have raft begin a new log whose entries the FSM would skip.
func TestRaftLogDirApartFromTheStore(t *testing.T) {
	dataDir, logDir := t.TempDir(), t.TempDir()
	node, store, err := startAlone(t, dataDir, logDir)
	if err != nil {
		t.Fatal(err)
	}
	waitLeaderAlone(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 5 { // one entry each: the store applies past the other log's end
		if _, err := node.Propose(ctx, &command.Cmd{Merchant: &command.Merchant{ID: "mer_apart"}}); err != nil {
			t.Fatal(err)
		}
	}
	stopAlone(t, node, store)

	if segs, _ := filepath.Glob(filepath.Join(logDir, "*.wal")); len(segs) == 0 {
		t.Errorf("no raft log segments in %s", logDir)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft", "wal")); !os.IsNotExist(err) {
		t.Errorf("the data dir has a raft log as well (stat: %v)", err)
	}

	empty := t.TempDir()
	if node, store, err := startAlone(t, dataDir, empty); err == nil {
		stopAlone(t, node, store)
		t.Fatal("started on a store that applied entries, with an empty raft log")
	} else if !strings.Contains(err.Error(), "ends at 0") || !strings.Contains(err.Error(), empty) {
		t.Errorf("error does not say which directory lacks the log: %v", err)
	}

	// Another node's shorter log is refused too: it ends before what the
	// store has applied.
	otherData, otherLog := t.TempDir(), t.TempDir()
	other, otherStore, err := startAlone(t, otherData, otherLog)
	if err != nil {
		t.Fatal(err)
	}
	stopAlone(t, other, otherStore)
	if node, store, err := startAlone(t, dataDir, otherLog); err == nil {
		stopAlone(t, node, store)
		t.Fatal("started on another node's shorter raft log")
	} else if !strings.Contains(err.Error(), otherLog) {
		t.Errorf("error does not name the log's folder: %v", err)
	}

	node, store, err = startAlone(t, dataDir, logDir)
	if err != nil {
		t.Fatalf("restart with its own raft log: %v", err)
	}
	defer stopAlone(t, node, store)
	if ms, err := store.Merchants(); err != nil || len(ms) != 1 || ms[0].ID != "mer_apart" {
		t.Errorf("merchants after the restart: %v, %v; want mer_apart", ms, err)
	}
}

// A node that is the only voter of its configuration leads without waiting
// out its heartbeat timeout, new or restarted: with a 60 s timeout, raft's
// own timer would first fire after 60-120 s. The configured timeout is
// back in place afterwards.
func TestSoleVoterIsElectedAtOnce(t *testing.T) {
	dataDir, logDir := t.TempDir(), t.TempDir()
	slow := func(c *Config) { c.HeartbeatTimeout, c.ElectionTimeout = time.Minute, time.Minute }
	for _, start := range []string{"new", "restarted"} {
		node, store, err := startAloneWith(t, dataDir, logDir, slow)
		if err != nil {
			t.Fatal(err)
		}
		waitLeaderAlone(t, node)
		if hb := node.Raft.ReloadableConfig().HeartbeatTimeout; hb != time.Minute {
			t.Errorf("%s: heartbeat timeout %s after the election, want 1m0s", start, hb)
		}
		stopAlone(t, node, store)
	}
}
