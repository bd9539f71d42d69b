package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/transport/signature"
)

// Every acknowledged change survives SIGTERM (exit 0) and SIGKILL.
func TestRestartKeepsAcknowledgedChanges(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	m := n.CreateMerchant(t, 10000)

	type want struct{ status, settled, refunded int64 }
	orders := map[string]string{}
	for i := 0; i < 20; i++ {
		id := newOrderID("dur")
		m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 24))
		orders[id] = "authorized"
	}
	for id := range orders {
		m.WaitStatus(t, id, "authorized", 5*time.Second)
	}
	settled := 0
	for id := range orders {
		if settled == 10 {
			break
		}
		if r := m.Post(t, "settle", map[string]any{"order_id": id, "amount": 1000}); r.Status != 200 {
			t.Fatalf("settle: %s", r.Body)
		}
		orders[id] = "settled"
		settled++
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for id := range orders {
			out[id] = string(m.Post(t, "status", map[string]any{"order_id": id}).Body)
		}
		return out
	}
	before := snapshot()

	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM must drain and exit 0: %v\n%s", err, n.Logs())
	}
	n.Restart()
	check := func(when string) {
		t.Helper()
		after := snapshot()
		for id, body := range before {
			if after[id] != body {
				t.Fatalf("%s: order %s changed:\nbefore %s\nafter  %s", when, id, body, after[id])
			}
		}
	}
	check("after SIGTERM")
	// A write right before SIGKILL is acknowledged, so it must survive.
	last := newOrderID("dur-last")
	m.Post(t, "charge", chargeBody(last, "4111111111111111", 5, 24))
	lastTxn := m.WaitStatus(t, last, "authorized", 5*time.Second).Body
	before[last] = string(lastTxn)
	orders[last] = "authorized"
	n.Kill()
	n.Restart()
	check("after SIGKILL")
}

// Auto-settlement is scheduled durably: it happens after a restart too.
func TestAutoSettleAfterRestart(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--settle-delay-unit", "1s"}})
	m := n.CreateMerchant(t, 10000)
	id := newOrderID("auto")
	m.Post(t, "charge", chargeBody(id, "4111111111111111", 800, 2)) // settles 2 s after authorisation
	m.WaitStatus(t, id, "authorized", 5*time.Second)
	n.Kill()
	time.Sleep(2500 * time.Millisecond) // the delay ends while the node is down
	n.Restart()
	st := m.WaitStatus(t, id, "settled", 10*time.Second)
	if st.Num("settled_amount") != 800 {
		t.Fatalf("auto-settle settles the full amount: %s", st.Body)
	}
	if txns, _ := st.Get("transactions").(map[string]any); len(txns) != 2 {
		t.Fatalf("want auth and exactly one settle: %s", st.Body)
	}
}

// An authorisation accepted (processing) but not answered when the node
// dies is resumed after restart, once.
func TestPendingAuthorisationResumesAfterKill(t *testing.T) {
	dir := t.TempDir()
	key := nodetest.NewKeyFile(t)
	n := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key, Args: []string{"--acquirer-latency", "30s"}})
	m := n.CreateMerchant(t, 10000)
	ids := []string{newOrderID("pend"), newOrderID("pend")}
	for _, id := range ids {
		if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 300, 24)); r.Str("status") != "processing" {
			t.Fatalf("charge: %s", r.Body)
		}
	}
	n.Kill()
	// Same data dir, a fast acquirer this time.
	n2 := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key})
	m2 := m.At(n2)
	for _, id := range ids {
		st := m2.WaitStatus(t, id, "authorized", 10*time.Second)
		onlyTxn(t, st)
	}
	// Nothing else happens to them later: the start's resume pass, the one
	// source of their authorisation, named each once, and an authorised
	// order is no longer pending for any later pass.
	waitResumed(t, n2, len(ids))
	for _, id := range ids {
		onlyTxn(t, m2.Post(t, "status", map[string]any{"order_id": id}))
	}
}

// Authorisations pending when a Raft snapshot is taken, and ones accepted
// after it, are all resumed after a kill, once each: the first from the
// pending set's checkpoint that the snapshot wrote (raft does not replay
// their acceptances), the others from the log entries raft replays after
// it (cluster's TestReplayRebuildsThePendingAuthorisations covers each
// path of that replay).
func TestPendingAuthorisationsAcrossASnapshotResumeAfterKill(t *testing.T) {
	dir := t.TempDir()
	key := nodetest.NewKeyFile(t)
	n := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key, Args: []string{
		"--acquirer-latency", "30s", "--raft-snapshot-threshold", "16", "--raft-snapshot-interval", "100ms"}})
	m := n.CreateMerchant(t, 10000)
	charge := func(prefix string) string {
		id := newOrderID(prefix)
		if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 300, 24)); r.Str("status") != "processing" {
			t.Fatalf("charge: %s", r.Body)
		}
		return id
	}
	// One entry each: enough for the snapshot threshold.
	var ids []string
	for range 20 {
		ids = append(ids, charge("snap-before"))
	}
	waitSnapshot(t, filepath.Join(dir, "raft", "snapshots"), 10*time.Second)
	for range 3 {
		ids = append(ids, charge("snap-after"))
	}
	n.Kill()

	n2 := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: key})
	m2 := m.At(n2)
	for _, id := range ids {
		onlyTxn(t, m2.WaitStatus(t, id, "authorized", 10*time.Second))
	}
	waitResumed(t, n2, len(ids))
	for _, id := range ids {
		onlyTxn(t, m2.Post(t, "status", map[string]any{"order_id": id}))
	}
}

// waitSnapshot waits until raft has finished a snapshot in dir (a folder
// with its meta.json; one being written ends in .tmp).
func waitSnapshot(t *testing.T, dir string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		metas, _ := filepath.Glob(filepath.Join(dir, "*", "meta.json"))
		for _, meta := range metas {
			if filepath.Ext(filepath.Dir(meta)) != ".tmp" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no raft snapshot in %s within %s", dir, within)
}

// Card numbers never appear in clear in the data dir or in the logs.
func TestNoCardNumberAtRest(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{DataDir: dir, Args: []string{"--log-level", "debug"}})
	m := n.CreateMerchant(t, 10000)
	cards := []string{"4111111111111111", "5555555555554444", "378282246310005", "4000000000000002", "4242424242424242"}
	var ids []string
	for _, c := range cards {
		id := newOrderID("pan")
		m.Post(t, "charge", chargeBody(id, c, 100, 24))
		ids = append(ids, id)
	}
	// A validation failure echoes nothing of the card either.
	bad := chargeBody(newOrderID("pan-bad"), "4111111111111111", 100, 24)
	bad["currency"] = "XXXX"
	m.Post(t, "charge", bad)
	// Nor does a request fasthttp cannot parse: a signature wrapped at 76
	// columns (base64 without -w0) puts a line without a colon in the
	// header; fasthttp's error used to quote the request, body included.
	wrapped := chargeBody(newOrderID("pan-wrapped"), "4111111111111111", 100, 24)
	postWithWrappedSignature(t, n, m, wrapped)
	// Every charge answered by the acquirer (its token and result written)
	// before the node stops and the data dir is read.
	for _, id := range ids {
		for deadline := time.Now().Add(10 * time.Second); m.Post(t, "status", map[string]any{"order_id": id}).Str("status") == "processing"; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("order %s still processing", id)
			}
		}
	}
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, c := range cards {
			if bytes.Contains(data, []byte(c)) {
				t.Errorf("card number %s in clear in %s", c, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("scanned only %d files: is the data dir right?", files)
	}
	logs := n.Logs()
	if len(logs) == 0 {
		t.Fatal("no log output captured")
	}
	for _, c := range cards {
		if bytes.Contains([]byte(logs), []byte(c)) {
			t.Errorf("card number %s in the node's log output", c)
		}
	}
	if strings.Contains(logs, "card_cvv") {
		t.Error("a request body's card_cvv in the node's log output")
	}
	if !strings.Contains(logs, "http transport") {
		t.Error("fasthttp's error for the wrapped signature did not reach the node's log")
	}
}

// postWithWrappedSignature sends a signed charge over a raw connection with
// its signature header folded over three lines, and checks the node refuses
// it as unreadable (400).
func postWithWrappedSignature(t *testing.T, n *nodetest.Node, m *nodetest.Merchant, body map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	sig := signature.Sign(m.PublicKey, m.SecretKey, raw)
	folded := sig[:76] + "\n" + sig[76:152] + "\n" + sig[152:]
	conn, err := net.DialTimeout("tcp", n.HTTPAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/v3/charge HTTP/1.1\r\nHost: %s\r\nmerchant: %s\r\nsignature: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", n.HTTPAddr, m.PublicKey, folded, len(raw), raw)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, _ := io.ReadAll(conn)
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 400")) {
		t.Fatalf("a folded signature header: got %q, want 400", answer)
	}
}

// A node whose store folder was lost or wiped (an operator removed a corrupt
// store), while its raft folder survives with a snapshot and a log compacted
// behind it, restores the snapshot before raft replays the rest of the log.
// It used to start from an empty store, ready, knowing no merchant.
func TestLostStoreIsRestoredFromTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{DataDir: dir, KeyFile: nodetest.NewKeyFile(t),
		Args: []string{"--raft-snapshot-threshold", "16", "--raft-snapshot-interval", "100ms"}})
	m := n.CreateMerchant(t, 100000)
	var ids []string
	for range 40 {
		id := newOrderID("lost")
		if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 0)); r.Status != 200 {
			t.Fatalf("charge: %d %s", r.Status, r.Body)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		m.WaitStatus(t, id, "settled", 5*time.Second)
	}
	// Wait for a snapshot, and for the log compacted behind it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if snaps, _ := filepath.Glob(filepath.Join(dir, "raft", "snapshots", "*", "meta.json")); len(snaps) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no raft snapshot was taken")
		}
	}
	time.Sleep(time.Second)
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	for _, id := range ids {
		if st := m.Post(t, "status", map[string]any{"order_id": id}); st.Status != 200 || st.Str("status") != "settled" {
			t.Fatalf("order %s after the store was lost: %d %s", id, st.Status, st.Body)
		}
	}
	const said = "restoring the snapshot"
	if strings.Count(n.Logs(), said) != 1 {
		t.Errorf("the node said %q %d times, want once", said, strings.Count(n.Logs(), said))
	}
	// A repeated charge is found, not taken again.
	r := m.Post(t, "charge", chargeBody(ids[0], "4111111111111111", 1000, 0))
	if r.Status != 200 || r.Str("status") != "settled" {
		t.Fatalf("repeated charge after the restore: %d %s", r.Status, r.Body)
	}
	// The restored store is whole: the next restart (whose log is captured
	// anew) restores nothing.
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	m.WaitStatus(t, ids[len(ids)-1], "settled", 5*time.Second)
	if strings.Contains(n.Logs(), said) {
		t.Errorf("a restart of a whole store restored the snapshot again")
	}
}

// With --raft-log-dir the raft log lives apart from the data dir (an
// operator puts it on its own device): charges survive a SIGKILL there, and
// the same data dir with a folder that holds no log refuses to start
// instead of beginning a new log.
func TestRaftLogDirOfItsOwn(t *testing.T) {
	logDir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--raft-log-dir", logDir}})
	m := n.CreateMerchant(t, 1000)
	id := newOrderID("raftdir")
	if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000, 24)); r.Status != 200 {
		t.Fatalf("charge: %d %s", r.Status, r.Body)
	}
	m.WaitStatus(t, id, "authorized", 5*time.Second)
	n.Restart() // SIGKILL, then the same flags
	m.WaitStatus(t, id, "authorized", 5*time.Second)
	if segs, _ := filepath.Glob(filepath.Join(logDir, "*.wal")); len(segs) == 0 {
		t.Errorf("no raft log in --raft-log-dir %s", logDir)
	}
	if _, err := os.Stat(filepath.Join(n.DataDir, "raft", "wal")); !os.IsNotExist(err) {
		t.Errorf("the data dir has a raft log as well (stat: %v)", err)
	}
	// SIGTERM, so the store's applied index is on disk: after a SIGKILL
	// the store may be behind (Pebble's WAL is not synced; the raft log
	// re-applies the rest), at worst as empty as a new node's.
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}

	empty := t.TempDir()
	args := append([]string{"--http-addr", nodetest.FreeAddr(t), "--raft-addr", nodetest.FreeAddr(t)}, n.Args...)
	args = append(args, "--raft-log-dir", empty) // the last one wins
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, nodetest.Binary(t), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gatewayd kept running with a folder that holds no raft log:\n%s", out)
	}
	if err == nil {
		t.Fatalf("gatewayd exited 0 with a folder that holds no raft log:\n%s", out)
	}
	if !bytes.Contains(out, []byte("ends at 0")) {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
}

// A word that is not a flag ends Go's flag parsing: gatewayd refuses it
// instead of starting with every later flag dropped (here --join and the
// addresses: a node of a cluster of its own, on the default ports).
func TestGatewaydRefusesAStrayArgument(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodetest.Binary(t), "--dev", "--allow-private-callbacks", "true",
		"--data-dir", t.TempDir(), "--http-addr", nodetest.FreeAddr(t), "--raft-addr", nodetest.FreeAddr(t))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("gatewayd started with a stray argument:\n%s", out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !bytes.Contains(out, []byte(`unexpected argument "true"`)) {
		t.Fatalf("want exit 2 naming the argument, got %v:\n%s", err, out)
	}
}

// SIGTERM does not wait for connections that have sent nothing or half a
// request (a browser's preconnect to the hosted form): it used to hold the
// node for their 30 s read timeout.
func TestStopDoesNotWaitForSilentConnections(t *testing.T) {
	n := nodetest.Start(t, nodetest.Options{})
	silent, err := net.Dial("tcp", n.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	half, err := net.Dial("tcp", n.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	fmt.Fprintf(half, "POST /api/v3/status HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := n.Stop(15 * time.Second); err != nil {
		t.Fatalf("SIGTERM with a silent and a half-sent connection open: %v", err)
	}
	t.Logf("stopped in %s", time.Since(start))
}

// waitResumed waits for the node's start-up pass over the pending
// authorisations, and checks it resumed count of them.
func waitResumed(t *testing.T, n *nodetest.Node, count int) {
	t.Helper()
	want := fmt.Sprintf(`"count":%d`, count)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, line := range strings.Split(n.Logs(), "\n") {
			if strings.Contains(line, "resumed pending authorisations") {
				if !strings.Contains(line, want) {
					t.Fatalf("resume pass: %s; want %s", line, want)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no resume pass logged:\n%s", n.Logs())
		}
	}
}
