package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// faultyWAL fails the given operations on Pebble's write-ahead log files
// while it is switched on: a disk that refuses writes, or fsyncs.
type faultyWAL struct {
	kinds    []errorfs.OpKind
	failing  atomic.Bool
	injected atomic.Int64
}

func (f *faultyWAL) String() string { return fmt.Sprintf("faultyWAL%v", f.kinds) }

func (f *faultyWAL) MaybeError(op errorfs.Op) error {
	if !f.failing.Load() || !slices.Contains(f.kinds, op.Kind) || !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	f.injected.Add(1)
	return errorfs.ErrInjected
}

// storeFaultFixture is a node's FSM over a store on a disk that can be
// made to fail, and the raft log (which raft keeps durable apart from the
// store) as the entries handed to the FSM.
type storeFaultFixture struct {
	t      *testing.T
	disk   *vfs.MemFS // the in-process fixture's crashable disk
	faults *faultyWAL
	store  *persistence.Store
	fsm    *FSM
	log    []*raft.Log
}

// storeFaultDirEnv names the directory a fault scenario's child process
// keeps its store in; set, the test binary is that child.
const storeFaultDirEnv = "GATEWAY_TEST_STOREFAULT_DIR"

// runStoreFault runs scenario, which must stop the node, in a child
// process of the test binary, then restarts the store from the disk the
// child left and replays raft's log into it, as a node restarted after
// the crash does. Pebble stops a process whose disk fails in more than one
// way: a panic that reaches the FSM's caller, or a fatal runtime error no
// recover sees (a failed WAL close while it rotates the memtable). Both
// are the node stopping, and only another process can watch either.
// The child prints each entry's index before applying it, so the parent
// knows the log the child's raft held.
func runStoreFault(t *testing.T, kinds []errorfs.OpKind, scenario func(f *storeFaultFixture)) {
	if dir := os.Getenv(storeFaultDirEnv); dir != "" {
		f := &storeFaultFixture{t: t, faults: &faultyWAL{kinds: kinds}}
		f.store, f.fsm = openFSMAt(t, errorfs.Wrap(vfs.Default, f.faults), dir)
		scenario(f) // returns once the node stopped; fails the test otherwise
		fmt.Println("storefault: stopped")
		os.Exit(3)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), storeFaultDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	failingFrom := strings.Index(text, "storefault: failing")
	switch {
	case code == 3:
	case code == 2 && failingFrom >= 0 && strings.Contains(text[failingFrom:], "pebble"):
		// Pebble's own fatal stop, after the faults began.
	default:
		t.Fatalf("the child exited %d; want a stop after the faults began:\n%s", code, text)
	}
	entries := regexp.MustCompile(`storefault: entry (\d+)`).FindAllStringSubmatch(text, -1)
	if len(entries) == 0 {
		t.Fatalf("the child applied no entry:\n%s", text)
	}
	n, _ := strconv.Atoi(entries[len(entries)-1][1])
	t.Logf("the child stopped at entry %d (exit %d)", n, code)
	f := &storeFaultFixture{t: t}
	for range n {
		f.log = append(f.log, f.nextEntry())
	}
	store, fsm := openFSMAt(t, vfs.Default, dir)
	defer store.Close()
	f.replayInto(store, fsm)
}

func openFSMAt(t *testing.T, fs vfs.FS, dir string) (*persistence.Store, *FSM) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := persistence.OpenFS(fs, dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	fsm, err := NewFSM(StoreState(s), logger)
	if err != nil {
		t.Fatal(err)
	}
	return s, fsm
}

// newStoreFaultFixture is a fixture in this process, on a crashable
// in-memory disk: for faults that stop the node with a panic the FSM's
// caller sees.
func newStoreFaultFixture(t *testing.T, kinds ...errorfs.OpKind) *storeFaultFixture {
	f := &storeFaultFixture{t: t, disk: vfs.NewCrashableMem(), faults: &faultyWAL{kinds: kinds}}
	f.store, f.fsm = openFSMAt(t, errorfs.Wrap(f.disk, f.faults), "state")
	return f
}

// crashAndReplay restarts the in-process fixture's store from what its
// disk had synced (a machine crash), then replays raft's log into it.
func (f *storeFaultFixture) crashAndReplay() {
	f.t.Helper()
	store, fsm := openFSMAt(f.t, f.disk.CrashClone(vfs.CrashCloneCfg{}), "state")
	defer store.Close()
	f.replayInto(store, fsm)
}

// failFromNow switches the faults on.
func (f *storeFaultFixture) failFromNow() {
	fmt.Println("storefault: failing")
	f.faults.failing.Store(true)
}

// nextEntry is the entry after f.log: a charge's acceptance and the
// previous one's approval.
func (f *storeFaultFixture) nextEntry() *raft.Log {
	idx := uint64(len(f.log) + 1)
	cmds := []command.Cmd{acceptance(fmt.Sprintf("o%d", idx))}
	if idx > 1 {
		cmds = append(cmds, approval(fmt.Sprintf("o%d", idx-1)))
	}
	return entry(f.t, idx, cmds...)
}

// commit appends the next entry to the log and applies it, as raft does
// once the entry is committed; stopped reports that the FSM stopped the
// node instead.
func (f *storeFaultFixture) commit() (stopped bool) {
	l := f.nextEntry()
	f.log = append(f.log, l)
	idx := l.Index
	fmt.Printf("storefault: entry %d\n", idx)
	var results []persistence.Result
	if stops(f.t, fmt.Sprintf("entry %d", idx), func() { results = f.fsm.ApplyBatch([]*raft.Log{l})[0].([]persistence.Result) }) {
		return true
	}
	for _, r := range results {
		if r.Err != nil || r.Outcome.Reject != nil {
			f.t.Fatalf("entry %d: %+v", idx, r)
		}
	}
	return false
}

// stops runs fn, which stops the node if it panics (the FSM runs on raft's
// goroutine: a panic there ends the process).
func stops(t *testing.T, what string, fn func()) (stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			t.Logf("%s stopped the node: %v", what, r)
			stopped = true
		}
	}()
	fn()
	return false
}

// replayInto is the node's restart after it stopped: the store holds what
// the child's disk kept, and raft hands the FSM its log again. Every
// committed entry is then in the store, the same as on a replica whose
// disk never failed. (The child's process died, not the machine: what it
// wrote without a sync is still in the OS's cache, so this is a process
// crash; a failed write itself never reached the file.)
func (f *storeFaultFixture) replayInto(store *persistence.Store, fsm *FSM) {
	f.t.Helper()
	applied := fsm.AppliedIndex()
	if applied >= uint64(len(f.log)) {
		f.t.Fatalf("the store holds index %d after the crash; the failed entry is %d", applied, len(f.log))
	}
	f.t.Logf("after the crash the store holds index %d of %d; raft's log has the rest", applied, len(f.log))
	fsm.ApplyBatch(f.log)
	ref, refFSM := openFSMAt(f.t, vfs.NewMem(), "state")
	defer ref.Close()
	refFSM.ApplyBatch(f.log)
	for i := 1; i <= len(f.log); i++ {
		want := order.StatusAuthorized
		if i == len(f.log) {
			want = order.StatusProcessing
		}
		o, err := store.GetOrder("m1", fmt.Sprintf("o%d", i))
		if err != nil || o == nil || o.Status != want {
			f.t.Fatalf("order o%d after the restart: %+v, %v; want %s", i, o, err, want)
		}
	}
	got, gotIdx, err1 := store.Digest()
	want, wantIdx, err2 := ref.Digest()
	if err1 != nil || err2 != nil || got != want || gotIdx != wantIdx {
		f.t.Fatalf("restarted store %.12s at %d (%v), a healthy replica %.12s at %d (%v)", got, gotIdx, err1, want, wantIdx, err2)
	}
}

// stopsWithin applies entries until the FSM stops the node, at most n.
func (f *storeFaultFixture) stopsWithin(n int) {
	f.t.Helper()
	before := f.fsm.AppliedIndex()
	for range n {
		if f.commit() {
			if got := f.fsm.AppliedIndex(); got >= uint64(len(f.log)) {
				f.t.Fatalf("the FSM counts the failed entry %d as applied (%d)", len(f.log), got)
			}
			return
		}
	}
	f.t.Fatalf("the store failed %d operations and the node applied %d more entries without stopping (from %d)",
		f.faults.injected.Load(), n, before)
}

// A write to Pebble's log that fails stops the node (the FSM's commit
// panics) rather than letting it serve a state that lacks the entry; after
// the restart raft's log brings back everything, acknowledged or not.
func TestFailedStoreWriteStopsTheNode(t *testing.T) {
	runStoreFault(t, []errorfs.OpKind{errorfs.OpFileWrite, errorfs.OpFileWriteAt}, func(f *storeFaultFixture) {
		for range 50 {
			if f.commit() {
				t.Fatal("stopped before any fault")
			}
		}
		f.failFromNow()
		f.stopsWithin(10_000)
	})
}

// A failed fsync fails the snapshot raft asks for before it compacts its
// log, so the log keeps the entries the disk may have lost; the next write
// stops the node, and the restart replays them.
func TestFailedStoreFsyncStopsTheNode(t *testing.T) {
	f := newStoreFaultFixture(t, errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo)
	for range 50 {
		if f.commit() {
			t.Fatal("stopped before any fault")
		}
	}
	f.failFromNow()
	// Pebble treats a failed synced commit as fatal, and the store's logger
	// stops the node there; a snapshot that returned an error instead would
	// do too (raft keeps its log and retries later).
	var taken bool
	stopped := stops(t, "the snapshot", func() {
		snap, err := f.fsm.Snapshot()
		if taken = err == nil; taken {
			snap.Release()
		}
	})
	if taken {
		t.Fatal("a snapshot was taken over a failed fsync: raft would compact entries the disk may not hold")
	}
	if f.faults.injected.Load() == 0 {
		t.Fatal("no fsync failed")
	}
	if !stopped {
		f.stopsWithin(10_000)
	}
	f.crashAndReplay()
}

// failingLogStore fails every append to the raft log while failing is set,
// as a disk that refuses the log's writes or fsyncs does.
type failingLogStore struct {
	raft.LogStore
	failing *atomic.Bool
}

var errLogAppend = errors.New("injected: raft log append failed")

func (s failingLogStore) StoreLogs(logs []*raft.Log) error {
	if s.failing.Load() {
		return errLogAppend
	}
	return s.LogStore.StoreLogs(logs)
}

func (s failingLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s failingLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// A leader whose raft log refuses an append does not acknowledge the
// command (raft answers its future with the error and steps down), and no
// replica applies it; once the disk is back, the client's retry commits it
// once. The harness's verifiers then check every acknowledged change on
// every replica and equal digests.
func TestFailedRaftLogAppend(t *testing.T) {
	seed := testSeed(t)
	h := newHarness(t, harnessOptions{seed: seed})
	ln, l := h.waitLeaderNode(10 * time.Second)
	ln.logFailing.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	res, err := l.Propose(ctx, &command.Cmd{Order: createCmd("append-fail", "txn-append-fail")})
	cancel()
	ln.logFailing.Store(false)
	if err == nil {
		t.Fatalf("the leader acknowledged a command its log could not append: %+v", res)
	}
	t.Logf("proposal over a failed append: %v", err)
	h.waitConverged(convergeWithin)
	for _, n := range h.nodes {
		n.with(func(_ *Node, st *persistence.Store) {
			if o, err := n.getOrder(st, testMerchant, "append-fail"); err != nil || o != nil {
				t.Errorf("%s applied a command no log holds: %+v %v", n.id, o, err)
			}
		})
	}
	deadline := time.Now().Add(convergeWithin)
	for {
		res, err := h.propose(createCmd("append-fail", "txn-append-fail"), 2*time.Second)
		if err == nil {
			if res.Order == nil || len(res.Order.Txns) != 1 || !res.Outcome.Created {
				t.Fatalf("the retry: %+v", res)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retry never committed: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // paces the retries during an election
	}
}
