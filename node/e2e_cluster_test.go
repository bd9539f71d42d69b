package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// clusterClient is a merchant's HTTP client for load: many connections per
// node, a bounded wait per request.
func clusterClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
}

// Three gatewayd processes; hundreds of concurrent charges spread over all
// of them; the leader gets SIGKILL mid-load and clients retry what failed
// with the same order_id and body. Afterwards every order that got a 200
// exists once with exactly one authorisation, a new leader took over
// within seconds, and the killed node, restarted after the log was
// compacted past it, catches up from a snapshot and ends with the same
// state digest as the others.
func TestClusterKillLeaderUnderLoad(t *testing.T) {
	c := nodetest.StartCluster(t, 3, "--raft-snapshot-threshold", "64", "--raft-snapshot-interval", "200ms",
		"--raft-wal-segment-bytes", "65536")
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 100000)
	m.HTTPClient = clusterClient()

	const orders, workers = 400, 100
	type result struct {
		status   int
		attempts int
		body     []byte
	}
	results := make([]result, orders)
	ids := make([]string, orders)
	bodies := make([][]byte, orders)
	for i := range ids {
		ids[i] = newOrderID(fmt.Sprintf("load%03d", i))
		bodies[i], _ = json.Marshal(chargeBody(ids[i], "4111111111111111", int64(100+i), 24))
	}

	var acked atomic.Int64
	var killedAt atomic.Int64 // unix ns
	next := make(chan int, orders)
	for i := 0; i < orders; i++ {
		next <- i
	}
	close(next)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				deadline := time.Now().Add(30 * time.Second)
				for attempt := 0; time.Now().Before(deadline); attempt++ {
					n := c.Nodes[(i+attempt)%len(c.Nodes)]
					if !n.Alive() {
						continue
					}
					r, err := m.At(n).TryPost("charge", bodies[i])
					results[i].attempts++
					if err == nil && r.Status == 200 {
						results[i].status, results[i].body = 200, r.Body
						acked.Add(1)
						break
					}
					if err == nil && r.Status != 503 {
						results[i].status, results[i].body = r.Status, r.Body
						break // a business answer: not retried
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}

	// SIGKILL the leader once a third of the charges are in.
	for acked.Load() < orders/3 {
		time.Sleep(5 * time.Millisecond)
	}
	old := c.Leader()
	if old == nil {
		t.Fatal("no leader mid-load")
	}
	oldSelf, _ := old.Self(false)
	old.Kill()
	killedAt.Store(time.Now().UnixNano())
	t.Logf("killed leader %s after %d acknowledged charges (%s into the load)", old.ID, acked.Load(), time.Since(start).Round(time.Millisecond))

	// Failover: kill → a new leader, and kill → first acknowledged write
	// (a new order, sent to the survivors until one answers 200).
	var newLeader *nodetest.Node
	electedCh := make(chan time.Duration, 1)
	go func() {
		newLeader = c.WaitLeader(old, 10*time.Second)
		electedCh <- time.Since(time.Unix(0, killedAt.Load()))
	}()
	probe := m
	var late *nodetest.Merchant // created while the old leader is down
	firstWrite := time.Duration(0)
	for i := 0; firstWrite == 0 && time.Since(time.Unix(0, killedAt.Load())) < 15*time.Second; i++ {
		n := c.Nodes[i%len(c.Nodes)]
		if !n.Alive() {
			continue
		}
		r, err := probe.At(n).TryPost("charge", chargeBody(newOrderID("probe"), "4111111111111111", 1, 24))
		if err == nil && r.Status == 200 {
			firstWrite = time.Since(time.Unix(0, killedAt.Load()))
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	elected := <-electedCh
	if firstWrite == 0 {
		t.Fatal("no write acknowledged within 15s of the leader's death")
	}
	t.Logf("failover: new leader %s elected %s after the kill; first acknowledged write %s after the kill",
		newLeader.ID, elected.Round(time.Millisecond), firstWrite.Round(time.Millisecond))
	if elected > 5*time.Second {
		t.Errorf("new leader took %s", elected)
	}

	late = newLeader.CreateMerchant(t, 1000)
	wg.Wait()
	loadTime := time.Since(start)
	retried, attempts := 0, 0
	for i, r := range results {
		attempts += r.attempts
		if r.attempts > 1 {
			retried++
		}
		if r.status != 200 {
			t.Fatalf("order %s: no 200 after retries: %d %s", ids[i], r.status, r.body)
		}
	}
	t.Logf("%d charges acknowledged in %s (%d requests, %d orders needed a retry)", orders, loadTime.Round(time.Millisecond), attempts, retried)

	// Every acknowledged order exists with exactly one authorisation, and
	// ends authorized (pending authorisations resumed by the new leader).
	survivor := m.At(newLeader)
	for _, id := range ids {
		st := survivor.WaitStatus(t, id, "authorized", 15*time.Second)
		txns, _ := st.Get("transactions").(map[string]any)
		auths := 0
		for _, tx := range txns {
			if tx.(map[string]any)["operation"] == "auth" {
				auths++
			}
		}
		if len(txns) != 1 || auths != 1 {
			t.Fatalf("order %s: want exactly one auth transaction: %s", id, st.Body)
		}
	}

	// The log moves past what the killed node has, so it must catch up from
	// a snapshot: push more charges until the leader compacted past it.
	for i := 0; ; i++ {
		st, err := newLeader.Self(false)
		// Compacted entries stay readable until their whole segment (64 KiB
		// here, a few hundred entries) is deleted: go well past it.
		if err == nil && st.FirstLogIndex > oldSelf.LastLogIndex+400 && st.LastSnapshotIndex > oldSelf.LastLogIndex {
			t.Logf("leader's log starts at %d; the killed node's ended at %d", st.FirstLogIndex, oldSelf.LastLogIndex)
			break
		}
		if i > 2000 {
			t.Fatalf("log not compacted past %d: %+v", oldSelf.LastLogIndex, st)
		}
		m.At(newLeader).Post(t, "charge", chargeBody(newOrderID("fill"), "4111111111111111", 1, 24))
	}
	old.Restart()
	c.WaitMembers(3, 20*time.Second)
	idx := c.WaitConverged(30 * time.Second)
	st, err := old.Self(false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Restores == 0 {
		t.Errorf("%s caught up without a snapshot restore: %+v", old.ID, st)
	}
	t.Logf("all three replicas at applied index %d with one digest; %s restored %d snapshot(s)", idx, old.ID, st.Restores)

	// The restarted node's merchant directory came with the snapshot: made
	// leader, it serves the merchant created while it was down.
	if _, err := old.Admin("POST", "/admin/v1/cluster/transfer-leadership", `{"node_id":"`+old.ID+`"}`, nil); err != nil {
		t.Fatalf("transfer leadership to %s: %v", old.ID, err)
	}
	if l := c.WaitLeader(nil, 10*time.Second); l != old {
		t.Fatalf("leader after the transfer: %s", l.ID)
	}
	if r := late.At(old).Post(t, "charge", chargeBody(newOrderID("late"), "4111111111111111", 5, 24)); r.Status != 200 {
		t.Fatalf("%s as leader refuses the merchant created while it was down: %d %s", old.ID, r.Status, r.Body)
	}

	// The restarted node answers status exactly as the others do. A 503
	// (an election under way on a loaded machine) asks the client to retry,
	// as the contract says; it is no answer about the order.
	for _, id := range ids[:50] {
		var want []byte
		for _, n := range c.Nodes {
			r := postRetrying(t, m.At(n), "status", map[string]any{"order_id": id})
			if want == nil {
				want = r.Body
			} else if string(r.Body) != string(want) {
				t.Fatalf("order %s: %s answers %s, others %s", id, n.ID, r.Body, want)
			}
		}
	}
}

// A new leader picks up what the old one left: authorisations waiting on
// the acquirer when the leader died, an automatic settlement that falls due
// after a second failover, and the notifications of those status changes.
// Each happens exactly once (one auth, one settle transaction); each
// notification arrives (at least once).
func TestClusterLeaderChangeResumesWork(t *testing.T) {
	c := nodetest.StartCluster(t, 3, "--acquirer-latency", "1500ms", "--settle-delay-unit", "1s",
		"--webhook-retry-delays", "100ms,200ms,400ms,800ms")
	hooks := newReceiver(t)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 10000)
	m.HTTPClient = clusterClient()
	follower := c.Nodes[0]
	if follower == leader {
		follower = c.Nodes[1]
	}

	settles, stays := newOrderID("resume-settle"), newOrderID("resume-auth")
	for id, delay := range map[string]int{settles: 5, stays: 24} {
		body := chargeBody(id, "4111111111111111", 700, delay)
		body["callback_url"] = hooks.URL()
		if r := m.At(follower).Post(t, "charge", body); r.Str("status") != "processing" {
			t.Fatalf("charge: %d %s", r.Status, r.Body)
		}
	}
	// The acquirer takes 1.5 s: both authorisations are in flight on the
	// leader when it dies.
	leader.Kill()
	second := c.WaitLeader(leader, 10*time.Second)
	t.Logf("killed %s with two authorisations in flight; %s leads", leader.ID, second.ID)
	ms := m.At(second)
	ms.WaitStatus(t, settles, "authorized", 15*time.Second)
	ms.WaitStatus(t, stays, "authorized", 15*time.Second)

	// The settlement falls due 5 s after the authorisation: kill this
	// leader too before then (the first is back as a follower first).
	leader.Restart()
	c.WaitMembers(3, 20*time.Second)
	if r := ms.Post(t, "status", map[string]any{"order_id": settles}); r.Str("status") != "authorized" {
		t.Fatalf("settled before the second failover; the test needs a longer delay: %s", r.Body)
	}
	second.Kill()
	third := c.WaitLeader(second, 10*time.Second)
	t.Logf("killed %s before the settlement was due; %s leads", second.ID, third.ID)
	st := m.At(third).WaitStatus(t, settles, "settled", 20*time.Second)
	count := func(r *nodetest.Response) map[string]int {
		out := map[string]int{}
		txns, _ := r.Get("transactions").(map[string]any)
		for _, tx := range txns {
			out[tx.(map[string]any)["operation"].(string)]++
		}
		return out
	}
	if ops := count(st); ops["auth"] != 1 || ops["settle"] != 1 || len(ops) != 2 || st.Num("settled_amount") != 700 {
		t.Fatalf("settled order: want one auth and one settle: %s", st.Body)
	}

	// Notifications: authorized ×2 and settled ×1, each delivered.
	want := map[string]bool{settles + "/authorized": true, stays + "/authorized": true, settles + "/settled": true}
	deadline := time.Now().Add(15 * time.Second)
	got := map[string]int{}
	for time.Now().Before(deadline) {
		got = map[string]int{}
		for _, cl := range hooks.Calls() {
			var v struct {
				OrderID string `json:"order_id"`
				Status  string `json:"status"`
			}
			json.Unmarshal(cl.body, &v)
			got[v.OrderID+"/"+v.Status]++
		}
		all := true
		for k := range want {
			all = all && got[k] > 0
		}
		if all {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k := range want {
		if got[k] == 0 {
			t.Errorf("notification %s never delivered: %v", k, got)
		}
	}
	t.Logf("notifications received: %v", got)
	second.Restart()
	c.WaitConverged(30 * time.Second)
	// Nothing else happened to them: after the notifications of every
	// change and with every replica converged, each still holds one auth
	// (and the settled one its one settle).
	for _, n := range c.Nodes {
		// A 503 (the restarted node still catching up, or an election
		// under way) asks the client to retry; it says nothing of the order.
		if r := postRetrying(t, m.At(n), "status", map[string]any{"order_id": stays}); count(r)["auth"] != 1 || len(count(r)) != 1 {
			t.Fatalf("authorised order on %s: want exactly one auth: %d %s", n.ID, r.Status, r.Body)
		}
		if r := postRetrying(t, m.At(n), "status", map[string]any{"order_id": settles}); count(r)["auth"] != 1 || count(r)["settle"] != 1 || len(count(r)) != 2 {
			t.Fatalf("settled order on %s: want one auth and one settle: %d %s", n.ID, r.Status, r.Body)
		}
	}
}

// Retention removes a delivered notification from every replica, not just
// the leader's store, and the replicas still agree byte for byte.
func TestClusterRetentionPrunesEveryReplica(t *testing.T) {
	c := nodetest.StartCluster(t, 3, "--webhook-retention", "500ms")
	hooks := newReceiver(t)
	leader := c.WaitLeader(nil, 10*time.Second)
	m := leader.CreateMerchant(t, 10000)
	m.HTTPClient = clusterClient()
	ids := []string{chargeWithCallback(m, t, hooks.URL()), chargeWithCallback(m, t, hooks.URL())}
	hooks.waitCalls(len(ids), 10*time.Second)
	for _, n := range c.Nodes {
		for _, id := range ids {
			for deadline := time.Now().Add(15 * time.Second); len(listDeliveries(t, n, m.ID, id)) != 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s still lists the notification of %s: %v", n.ID, id, listDeliveries(t, n, m.ID, id))
				}
			}
		}
	}
	for _, id := range ids {
		if r := m.Post(t, "status", map[string]any{"order_id": id}); r.Str("status") != "authorized" {
			t.Fatalf("the order outlives its notification: %d %s", r.Status, r.Body)
		}
	}
	c.WaitConverged(30 * time.Second)
}

// A deposed leader that has not noticed must not answer from its store.
//
// The leader is paused (SIGSTOP: a long GC pause, a stalled VM) and the
// others elect a new leader, which settles an order. Then the others are
// paused too, requests are sent to the old leader, and it wakes alone. It
// runs with a longer heartbeat timeout than the others, so its leader
// lease (half of it) has not run out: it still believes it leads, hears
// from no one, and its store has not seen the settlement. Each status read
// and each repeat of the charge must get a 503 (leadership not confirmed)
// or, relayed to the new leader once the others wake, the settled order;
// never the authorised order from before. That is the read barrier's
// leadership confirmation (cluster/DESIGN.md, "Read path"): without it,
// this test failed in 6 runs of 7. With raft's VerifyLeader as the whole
// confirmation it failed once in CI: a heartbeat answered just before the
// pause counted when the old leader woke (cluster's
// TestReadBarrierIgnoresAnswersSentBeforeIt stages that every time).
func TestClusterDeposedLeaderServesNoStaleRead(t *testing.T) {
	c := nodetest.StartCluster(t, 3, "--raft-heartbeat-timeout", "2s", "--raft-election-timeout", "2s")
	// The lease must outlast the pause: 7 s against ~3-5 s for the others
	// (2 s heartbeat timeout) to elect a new leader. Its heartbeats, every
	// tenth of its timeout, still come more often than the others' timeout.
	old := c.Nodes[2]
	old.Args = append(old.Args, "--raft-heartbeat-timeout", "14s", "--raft-election-timeout", "14s")
	old.Restart()
	c.WaitMembers(3, 20*time.Second)
	c.WaitConverged(20 * time.Second)
	if _, err := old.Admin("POST", "/admin/v1/cluster/transfer-leadership", `{"node_id":"`+old.ID+`"}`, nil); err != nil {
		t.Fatalf("transfer leadership to %s: %v", old.ID, err)
	}
	if l := c.WaitLeader(nil, 10*time.Second); l != old {
		t.Fatalf("leader after the transfer: %s", l.ID)
	}

	m := old.CreateMerchant(t, 100000)
	m.HTTPClient = clusterClient()
	id := newOrderID("deposed")
	charge := chargeBody(id, "4111111111111111", 1000, 24)
	if r := m.At(old).Post(t, "charge", charge); r.Status != 200 {
		t.Fatalf("charge: %d %s", r.Status, r.Body)
	}
	m.At(old).WaitStatus(t, id, "authorized", 10*time.Second)
	c.WaitConverged(10 * time.Second)

	old.Pause()
	pausedAt := time.Now()
	next := c.WaitLeader(old, 10*time.Second)
	if r := m.At(next).Post(t, "settle", map[string]any{"order_id": id, "amount": 1000}); r.Str("status") != "settled" {
		t.Fatalf("settle on the new leader %s: %d %s", next.ID, r.Status, r.Body)
	}
	var others []*nodetest.Node
	for _, n := range c.Nodes {
		if n != old {
			n.Pause()
			others = append(others, n)
		}
	}

	// The requests wait in the paused node's sockets, to be read the moment
	// it wakes. One relayed to the paused new leader waits for it. Half are
	// status reads; half repeat the charge, which the order actor answers
	// from the order it holds (a local decision, the other thing the
	// barrier guards).
	const readers = 16
	type answer struct {
		op  string
		r   *nodetest.Response
		err error
	}
	answers := make(chan answer, readers)
	toOld := m.At(old)
	toOld.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	for i := 0; i < readers; i++ {
		op, body := "status", map[string]any{"order_id": id}
		if i%2 == 1 {
			op, body = "charge", charge
		}
		go func() {
			r, err := toOld.TryPost(op, body)
			answers <- answer{op, r, err}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	old.Resume()
	t.Logf("%s settled the order; %s woke alone after %s", next.ID, old.ID, time.Since(pausedAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	for _, n := range others {
		n.Resume()
	}

	counts := map[string]int{}
	for i := 0; i < readers; i++ {
		a := <-answers
		switch {
		case a.err != nil:
			t.Errorf("%s from the deposed leader: %v", a.op, a.err)
		case a.r.Status == 503:
			counts[a.op+" 503"]++
		case a.r.Status == 200 && a.r.Str("status") == "settled":
			counts[a.op+" settled"]++
		default:
			t.Errorf("a stale or wrong %s answer from the deposed leader: %d %s", a.op, a.r.Status, a.r.Body)
		}
	}
	t.Logf("its answers: %v", counts)
	r := m.At(old).WaitStatus(t, id, "settled", 15*time.Second)
	if r.Num("settled_amount") != 1000 {
		t.Fatalf("after the others woke: %s", r.Body)
	}
	c.WaitConverged(20 * time.Second)
}

// A leader stopped with SIGTERM hands leadership to another voter first:
// when it has exited the others already follow a new leader, and requests
// through them go on. It used to exit as leader, and every node answered
// 503 6.02 until an election timeout passed.
func TestClusterLeaderStopHandsOver(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	c.WaitMembers(3, 10*time.Second)
	m := leader.CreateMerchant(t, 100000)
	follower := c.Other(leader)
	mf := m.At(follower)
	mf.HTTPClient = clusterClient()

	stop := make(chan struct{})
	type outcome struct {
		status int
		at     time.Time
	}
	outcomes := make(chan outcome, 10000)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := mf.TryPost("charge", chargeBody(newOrderID(fmt.Sprintf("handover%d-%d", w, i)), "4111111111111111", 100, 24))
				status := 0
				if err == nil {
					status = r.Status
				}
				outcomes <- outcome{status, time.Now()}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := leader.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	st, err := follower.Status()
	if err != nil || st.LeaderID == "" || st.LeaderID == leader.ID {
		t.Errorf("right after the leader stopped, %s follows %+v (%v): want a new leader", follower.ID, st, err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(outcomes)
	var ok, failed, failedAfter int
	for o := range outcomes {
		switch {
		case o.status == 200:
			ok++
		case o.at.After(stopped):
			failedAfter++
			fallthrough
		default:
			failed++
		}
	}
	t.Logf("%d charges answered 200, %d not (%d of them after the leader stopped)", ok, failed, failedAfter)
	if failedAfter > 0 {
		t.Errorf("%d charges through a follower failed after the old leader had stopped", failedAfter)
	}
	if !strings.Contains(leader.Logs(), "leadership handed over before stopping") {
		t.Error("the stopping leader did not say it handed leadership over")
	}
}

// A join cannot take a live member's place. A fourth node started without
// --node-id (node1 by default) and with --join asks to be added as the
// leader's id at its own addresses; a join that names a live follower's
// raft address under a new id would remove that follower. Both are refused
// (409), the members stay as they were, and writes through a follower go
// on.
func TestClusterJoinCannotTakeALiveMembersPlace(t *testing.T) {
	c := nodetest.StartCluster(t, 3)
	leader := c.WaitLeader(nil, 10*time.Second)
	follower := c.Other(leader)
	other := c.Other(leader, follower)
	members := func() string { return memberList(t, leader) }
	before := members()

	twin := nodetest.Start(t, nodetest.Options{ID: leader.ID, Join: follower.HTTPAddr, KeyFile: c.KeyFile, NotReady: true})
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(twin.Logs(), "is a member at raft_addr"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the twin's join was not refused as taking a member's place; its log:\n%s", twin.Logs())
		}
	}
	body := fmt.Sprintf(`{"node_id":"node9","raft_addr":%q,"http_addr":%q}`, other.RaftAddr, other.HTTPAddr)
	if st, err := leader.Admin("POST", "/admin/v1/cluster/join", body, nil); st != 409 {
		t.Fatalf("join of node9 at %s's addresses: %d %v, want 409", other.ID, st, err)
	}
	if after := members(); after != before {
		t.Fatalf("members changed: %s, were %s", after, before)
	}
	m := leader.CreateMerchant(t, 1000)
	if r := m.At(follower).Post(t, "charge", chargeBody(newOrderID("twin"), "4111111111111111", 1200, 24)); r.Status != 200 {
		t.Fatalf("charge through a follower: %d %s", r.Status, r.Body)
	}

	// A removed leader stops taking part but its process runs on: joined
	// again as it is, it would be a voter that never votes.
	twin.Kill()
	if st, err := leader.Admin("POST", "/admin/v1/cluster/remove", fmt.Sprintf(`{"node_id":%q}`, leader.ID), nil); st != 200 {
		t.Fatalf("remove %s: %d %v", leader.ID, st, err)
	}
	next := c.WaitLeader(leader, 10*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s, err := leader.Self(false)
		if err == nil && s.State == "Shutdown" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's raft did not stop after its removal: %+v %v", leader.ID, s, err)
		}
	}
	// The removal answered 200, so it is in the audit log, though the node
	// that served it was out of the cluster when it wrote the record.
	var audit struct {
		Records []struct{ Action, Target, Result string } `json:"records"`
	}
	if _, err := next.Admin("GET", "/admin/v1/audit?limit=1000", "", &audit); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, r := range audit.Records {
		recorded = recorded || r.Action == "POST /admin/v1/cluster/remove" && r.Result == "200"
	}
	if !recorded {
		t.Fatalf("the leader's removal of itself is not in the audit log: %+v", audit.Records)
	}
	body = fmt.Sprintf(`{"node_id":%q,"raft_addr":%q,"http_addr":%q}`, leader.ID, leader.RaftAddr, leader.HTTPAddr)
	if st, err := next.Admin("POST", "/admin/v1/cluster/join", body, nil); st != 409 || !strings.Contains(err.Error(), "left the cluster") {
		t.Fatalf("join of the removed %s as it is: %d %v, want 409", leader.ID, st, err)
	}
}

// memberList is the members n lists, as "id@raft_addr", sorted.
func memberList(t *testing.T, n *nodetest.Node) string {
	t.Helper()
	v, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range v.Members {
		out = append(out, m.ID+"@"+m.RaftAddr)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// A restarted member whose address changed gets its record updated, also
// when raft holds its raft address in another spelling: the first node's is
// recorded as its transport resolved it (localhost:P as 127.0.0.1:P), while
// the node asks with --raft-addr as typed.
func TestClusterMemberRecordFollowsANewHTTPAddr(t *testing.T) {
	key := nodetest.NewKeyFile(t)
	raftPort := strings.Split(nodetest.FreeAddr(t), ":")[1]
	first := nodetest.Start(t, nodetest.Options{ID: "node1", KeyFile: key, Args: []string{"--raft-addr", "localhost:" + raftPort}})
	c := nodetest.ClusterOf(t, key, first)
	for _, id := range []string{"node2", "node3"} {
		c.Nodes = append(c.Nodes, nodetest.Start(t, nodetest.Options{ID: id, KeyFile: key, Join: first.HTTPAddr}))
	}
	c.WaitMembers(3, 30*time.Second)
	if st, err := first.Admin("POST", "/admin/v1/cluster/transfer-leadership", `{"node_id":"node2"}`, nil); st != 200 {
		t.Fatalf("transfer: %d %v", st, err)
	}
	next := c.WaitLeader(first, 10*time.Second)
	first.HTTPAddr = nodetest.FreeAddr(t)
	first.Restart()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, err := next.Status()
		if err == nil {
			for _, m := range v.Members {
				if m.ID == "node1" && m.HTTPAddr == first.HTTPAddr {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node1's record does not hold its new http address %s: %+v %v\nnode1's log:\n%s", first.HTTPAddr, v, err, first.Logs())
		}
	}
}
