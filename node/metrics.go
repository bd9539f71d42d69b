package node

import (
	"sync"
	"syscall"

	"github.com/hashicorp/raft"
)

// registerNodeMetrics adds to the node's gauge set what an operator needs
// to tell a healthy cluster from a sick one without asking each node's
// admin API: who leads, how far this node's state trails the log, how
// often leadership moved, and how full its disks are. Read at each scrape
// (nothing on the request path); unregistered with the set on shutdown.
// Their # HELP text is in transport/exposition, with every other family's.
func (n *Node) registerNodeMetrics() {
	r := n.raft.Raft
	bit := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	n.gauges.NewGauge(`gateway_raft_leader`, func() float64 { return bit(n.raft.IsLeader()) })
	n.gauges.NewGauge(`gateway_raft_has_leader`, func() float64 {
		_, id := r.LeaderWithID()
		return bit(id != "")
	})
	n.gauges.NewGauge(`gateway_raft_term`, func() float64 { return float64(r.CurrentTerm()) })
	n.gauges.NewGauge(`gateway_raft_commit_index`, func() float64 { return float64(r.CommitIndex()) })
	n.gauges.NewGauge(`gateway_raft_applied_index`, func() float64 { return float64(n.raft.FSM.AppliedIndex()) })

	// Leader changes are counted as raft reports them, not sampled at
	// scrapes, which would miss a leader that came and went between two.
	changes := n.gauges.NewCounter(`gateway_raft_leader_changes_total`)
	var mu sync.Mutex
	var last raft.ServerID
	r.RegisterObserver(raft.NewObserver(make(chan raft.Observation, 1), false, func(o *raft.Observation) bool {
		if lo, ok := o.Data.(raft.LeaderObservation); ok && lo.LeaderID != "" {
			mu.Lock()
			if lo.LeaderID != last {
				last = lo.LeaderID
				changes.Inc()
			}
			mu.Unlock()
		}
		return false // counted here; nothing to queue
	}))

	logDir := n.cfg.RaftLogDir
	if logDir == "" {
		logDir = n.cfg.DataDir
	}
	for _, d := range []struct{ label, path string }{{"data", n.cfg.DataDir}, {"raft_log", logDir}} {
		n.gauges.NewGauge(`gateway_disk_free_bytes{dir="`+d.label+`"}`, func() float64 { free, _ := diskSpace(d.path); return free })
		n.gauges.NewGauge(`gateway_disk_size_bytes{dir="`+d.label+`"}`, func() float64 { _, size := diskSpace(d.path); return size })
	}
}

// diskSpace reports the bytes an unprivileged writer may still use on the
// file system holding path, and its size (0, 0 when it cannot be read).
func diskSpace(path string) (free, size float64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0
	}
	return float64(st.Bavail) * float64(st.Bsize), float64(st.Blocks) * float64(st.Bsize)
}
