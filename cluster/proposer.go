package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/hashicorp/raft"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
)

// Group commit at the entry level: concurrent proposals from many order
// actors are packed into one Raft log entry. Raft already batches entries
// into one fsynced append, but every entry still costs a future, a trip
// through the leader loop, its own encoding in the log and in every
// AppendEntries RPC, and a decode on each replica. Packing several commands
// per entry amortises all of that.
//
// The collector keeps at most entriesInFlight entries between raft.Apply
// and their applied answer. While those are in flight new proposals queue
// up, and the next entry takes all of them (up to maxEntryCommands): the
// busier the node, the fuller the entries. A lone proposal on an idle node
// goes out at once, so packing adds no latency when there is nothing to pack.
//
// One entry in flight: each entry then carries everything that queued
// during the last one's whole commit (fsynced append, replication, apply),
// so entries, fsyncs and FSM batches are fewer and fuller. With 4, entries
// carried ~10 commands at 64 workers, against ~40 now, and the node fsynced
// 533 times a second against 317. Back to back, charges rose 4-12 %,
// three nodes 13 %, lifecycle 12 % (docs/performance-history.md, series 13).
const (
	entriesInFlight  = 1
	maxEntryCommands = 256
	proposalQueueLen = 4096
)

// entryCommandBuckets bound gateway_raft_entry_commands, a count: 1, 2, 4
// ... 1024, past maxEntryCommands. A Prometheus histogram (le buckets),
// like every other here, so histogram_quantile can read it.
var entryCommandBuckets = metrics.ExponentialBuckets(1, 2, 11)

// proposal is one command waiting for its entry.
type proposal struct {
	ctx    context.Context
	queued time.Time
	cmd    command.Cmd
	// ans is written once, by answer, before done is signalled, and read
	// after it. (A channel carrying the answer itself would allocate its
	// buffer apart from the channel, since the answer holds pointers: one
	// more allocation per proposal.)
	ans  proposalAnswer
	done chan struct{} // buffered: the answerer never blocks
}

func newProposal(ctx context.Context, cmd command.Cmd) *proposal {
	return &proposal{ctx: ctx, queued: time.Now(), cmd: cmd, done: make(chan struct{}, 1)}
}

// answer gives the proposal its answer; each proposal gets exactly one.
func (p *proposal) answer(a proposalAnswer) {
	p.ans = a
	p.done <- struct{}{}
}

type proposalAnswer struct {
	res persistence.Result
	err error
}

// collector owns the packing loop of one node.
type collector struct {
	node  *Node
	queue chan *proposal
	slots chan struct{} // one token per entry in flight
	stop  chan struct{}
	once  sync.Once
	// entryBuf is send's scratch buffer: an entry is encoded into it, then
	// copied at its exact size for raft, which keeps that copy (log cache,
	// replication). Encoding into a fresh buffer grew it two or three times
	// per entry, ~1 KB allocated per charge for ~0.5 KB of entry. Only the
	// run goroutine uses it.
	entryBuf []byte
}

// maxKeptEntryBuf bounds the scratch buffer kept between entries: a rare
// huge entry (a prune's long list) does not pin its size.
const maxKeptEntryBuf = 1 << 20

// close stops the loop; proposals not yet answered get ErrNoLeader.
func (c *collector) close() { c.once.Do(func() { close(c.stop) }) }

func newCollector(n *Node) *collector {
	return &collector{
		node:  n,
		queue: make(chan *proposal, proposalQueueLen),
		slots: make(chan struct{}, entriesInFlight),
		stop:  make(chan struct{}),
	}
}

// propose queues cmd and waits for its result or ctx's end.
func (c *collector) propose(ctx context.Context, cmd *command.Cmd) (persistence.Result, error) {
	p := newProposal(ctx, *cmd)
	select {
	case c.queue <- p:
	case <-ctx.Done():
		return persistence.Result{}, fmt.Errorf("%w: not proposed within the deadline: %v", ErrNoLeader, ctx.Err())
	case <-c.stop:
		return persistence.Result{}, fmt.Errorf("%w: %v", ErrNoLeader, raft.ErrRaftShutdown)
	}
	select {
	case <-p.done:
		return p.ans.res, p.ans.err
	case <-ctx.Done():
		// Past the deadline the outcome is unknown, which ErrNoLeader says.
		return persistence.Result{}, fmt.Errorf("%w: %w: not committed within the deadline (it may still commit): %v", ErrNoLeader, ErrOutcomeUnknown, ctx.Err())
	case <-c.stop:
		return persistence.Result{}, fmt.Errorf("%w: %w: shut down before the answer (it may have committed): %v", ErrNoLeader, ErrOutcomeUnknown, raft.ErrRaftShutdown)
	}
}

func (c *collector) run() {
	for {
		var first *proposal
		select {
		case first = <-c.queue:
		case <-c.stop:
			return
		}
		// Wait for a free slot before packing: proposals arriving meanwhile
		// join this entry.
		select {
		case c.slots <- struct{}{}:
		case <-c.stop:
			first.answer(proposalAnswer{err: fmt.Errorf("%w: %v", ErrNoLeader, raft.ErrRaftShutdown)})
			return
		}
		batch := c.take(first)
		if len(batch) == 0 {
			<-c.slots
			continue
		}
		c.send(batch)
	}
}

// take packs first and whatever else is queued, dropping proposals whose
// caller has already given up (they are answered, never proposed).
func (c *collector) take(first *proposal) []*proposal {
	batch := make([]*proposal, 0, 8)
	add := func(p *proposal) {
		if err := p.ctx.Err(); err != nil {
			p.answer(proposalAnswer{err: fmt.Errorf("%w: not proposed within the deadline: %v", ErrNoLeader, err)})
			return
		}
		c.node.proposalWait.UpdateDuration(p.queued)
		batch = append(batch, p)
	}
	add(first)
	for len(batch) < maxEntryCommands {
		select {
		case p := <-c.queue:
			add(p)
		default:
			return batch
		}
	}
	return batch
}

// dropUnencodable answers each proposal whose command EncodeEntry refuses
// with its error and returns the others. (A JSON-encoded command refuses
// strings that are not UTF-8; the API refuses them at the door, but one that
// got into the store must not fail every proposal packed with its prune.)
func dropUnencodable(batch []*proposal, cmds []command.Cmd) ([]*proposal, []command.Cmd) {
	keep := 0
	for i, p := range batch {
		if _, err := command.EncodeEntry(cmds[i : i+1]); err != nil {
			p.answer(proposalAnswer{err: err})
			continue
		}
		batch[keep], cmds[keep] = p, cmds[i]
		keep++
	}
	return batch[:keep], cmds[:keep]
}

// encode encodes an entry into a buffer of its own.
func (c *collector) encode(cmds []command.Cmd) ([]byte, error) {
	buf, err := command.AppendEntry(c.entryBuf[:0], cmds)
	if cap(buf) <= maxKeptEntryBuf {
		c.entryBuf = buf
	}
	if err != nil {
		return nil, err
	}
	return bytes.Clone(buf), nil
}

// send proposes batch as one entry; a goroutine answers every proposal of
// it once raft has applied it, and frees the slot.
func (c *collector) send(batch []*proposal) {
	cmds := make([]command.Cmd, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd
	}
	fail := func(err error) {
		for _, p := range batch {
			p.answer(proposalAnswer{err: err})
		}
		<-c.slots
	}
	data, err := c.encode(cmds)
	if err != nil {
		// A command that cannot be encoded fails alone: the others packed
		// with it are proposed without it.
		if batch, cmds = dropUnencodable(batch, cmds); len(batch) == 0 {
			<-c.slots
			return
		}
		if data, err = c.encode(cmds); err != nil {
			fail(err)
			return
		}
	}
	start := time.Now()
	f := c.node.Raft.Apply(data, c.node.cfg.ApplyTimeout)
	go func() {
		// raft's timeout bounds only the enqueueing; every caller's own
		// context bounds its wait (propose).
		if err := f.Error(); err != nil {
			// Lost or shut down after the entry was appended (perhaps
			// replicated): a new leader may still commit it.
			appended := errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown)
			if err = leaderErr(err); appended {
				err = fmt.Errorf("%w (%w: a new leader may commit it)", err, ErrOutcomeUnknown)
			}
			fail(err)
			return
		}
		c.node.commitLat.UpdateDuration(start)
		res, ok := f.Response().([]persistence.Result)
		if ok && len(res) == 1 && len(batch) > 1 && res[0].Err != nil {
			fail(res[0].Err) // the entry as a whole failed
			return
		}
		if !ok || len(res) != len(batch) {
			fail(fmt.Errorf("cluster: unexpected apply response %T", f.Response()))
			return
		}
		for i, p := range batch {
			p.answer(proposalAnswer{res: res[i]})
		}
		c.node.entryCommands.Update(float64(len(batch)))
		<-c.slots
	}()
}
