package node_test

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// A follower that missed writes answers /readyz 200 only once it has
// applied what the leader had committed. Its own raft commit index does
// not say so: it is 0 after a restart until the first entries arrive, and
// then no more than the follower's own last log entry (and raft counts an
// entry applied once it has handed it to the FSM). Restart returns at the
// first 200, and the node is read at once. The load is sized so that the
// follower is still catching up when its HTTP listener opens (with 2,400
// charges it sometimes was not, and the old rule passed).
func TestClusterRestartedFollowerReadyOnlyWhenCaughtUp(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 1000000)
	m.HTTPClient = clusterClient()
	follower := c.Other(leader)
	follower.Kill()

	const orders, clients = 6000, 24
	next := make(chan int, orders)
	for i := 0; i < orders; i++ {
		next <- i
	}
	close(next)
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				body, _ := json.Marshal(chargeBody(newOrderID("ready"), "4111111111111111", int64(100+i), 24))
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					r, err := m.TryPost("charge", body)
					if err == nil && r.Status == 200 {
						break
					}
					if time.Now().After(deadline) || (err == nil && r.Status != 503) {
						failed.Add(1)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d charges not acknowledged", n, orders)
	}
	atStop, err := leader.Self(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d charges in %s; leader %s commit index %d", orders, time.Since(start).Round(time.Millisecond), leader.ID, atStop.CommitIndex)

	restarted := time.Now()
	follower.Restart() // returns at the first /readyz 200
	self, err := follower.Self(false)
	if err != nil {
		t.Fatal(err)
	}
	now, err := leader.Self(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ready %s after the restart: applied %d (own commit index %d); leader %s commit index %d",
		follower.ID, time.Since(restarted).Round(time.Millisecond), self.AppliedIndex, self.CommitIndex, now.State, now.CommitIndex)
	if self.AppliedIndex < atStop.CommitIndex {
		t.Fatalf("%s answered /readyz 200 at applied index %d, behind the %d the leader had committed before it restarted",
			follower.ID, self.AppliedIndex, atStop.CommitIndex)
	}
}
