package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// Concurrent proposals share log entries, and each proposer still gets the
// result of its own command: 200 creates from 50 goroutines, each answered
// with its own order, in fewer entries than commands.
func TestProposalsSharePackedEntries(t *testing.T) {
	h := newHarness(t, harnessOptions{seed: testSeed(t), nodes: 1})
	leader := h.waitLeader(5 * time.Second)
	first := leader.Raft.LastIndex()

	const workers, each = 50, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				oid := fmt.Sprintf("pack-%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := leader.Propose(ctx, &command.Cmd{Order: createCmd(oid, "txn-"+oid)})
				cancel()
				switch {
				case err != nil:
					errs <- err
				case res.Order == nil || res.Order.ID != oid || !res.Outcome.Created:
					errs <- fmt.Errorf("%s got %+v", oid, res)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries := leader.Raft.LastIndex() - first
	t.Logf("%d commands in %d entries", workers*each, entries)
	if entries >= workers*each {
		t.Fatalf("%d commands took %d entries: nothing was packed", workers*each, entries)
	}
}

// A caller that gave up before its command was packed is answered with
// ErrNoLeader and its command is never proposed.
func TestCancelledProposalIsNotProposed(t *testing.T) {
	h := newHarness(t, harnessOptions{seed: testSeed(t), nodes: 1})
	_, leader := h.leader()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := leader.Propose(ctx, &command.Cmd{Order: createCmd("gone", "txn-gone")})
	if err == nil {
		t.Fatal("a cancelled proposal succeeded")
	}
	h.nodes[0].with(func(_ *Node, store *persistence.Store) {
		if o, err := store.GetOrder(testMerchant, "gone"); err != nil || o != nil {
			t.Fatalf("the cancelled command was applied: %+v (%v)", o, err)
		}
	})
}

// Concurrent linearizable reads share leadership confirmations: 200 reads
// from 50 goroutines on a three-node cluster all pass, with fewer quorum
// rounds than reads.
func TestReadBarriersShareRounds(t *testing.T) {
	h := newHarness(t, harnessOptions{seed: testSeed(t)})
	_, leader := h.leader()
	before := leader.verify.rounds.Load()
	const workers, each = 50, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Go(func() {
			for range each {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				errs <- leader.ReadBarrier(ctx)
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	rounds := leader.verify.rounds.Load() - before
	t.Logf("%d reads confirmed by %d rounds", workers*each, rounds)
	if rounds == 0 || rounds >= workers*each {
		t.Fatalf("%d reads took %d rounds", workers*each, rounds)
	}
}

// A leader that is the only voter answers reads without a confirmation
// round (raft's quorum is itself); once a second voter is in the latest
// configuration, every read takes the round again.
func TestReadBarrierOfASoleVoter(t *testing.T) {
	h := newHarness(t, harnessOptions{seed: testSeed(t), nodes: 1})
	leader := h.waitLeader(5 * time.Second)
	readAll := func(n int) {
		t.Helper()
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := leader.ReadBarrier(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	before := leader.verify.rounds.Load()
	readAll(20)
	if rounds := leader.verify.rounds.Load() - before; rounds != 0 {
		t.Fatalf("a sole voter took %d confirmation rounds for 20 reads", rounds)
	}

	// A second voter joins: the reads confirm leadership with it.
	h.nodes = append(h.nodes, &hnode{id: "n1", addr: "inmem-1", dir: filepath.Join(t.TempDir(), "n1")})
	h.start(1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leader.Join(ctx, command.Member{NodeID: "n1", RaftAddr: "inmem-1", HTTPAddr: "http-n1"}); err != nil {
		t.Fatal(err)
	}
	before = leader.verify.rounds.Load()
	readAll(5)
	if rounds := leader.verify.rounds.Load() - before; rounds == 0 {
		t.Fatal("reads on a leader of two voters took no confirmation round")
	}
}
