package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
	"github.com/paygate/gateway/persistence/backup"
)

// takeBackup fetches GET /admin/v1/backup into path as gatewayctl backup
// does (through a verified temporary file).
func takeBackup(t *testing.T, n *nodetest.Node, path string) (backup.Header, string) {
	t.Helper()
	hdr, sum, err := backup.WriteFileAtomic(path, func(w io.Writer) error {
		req, _ := http.NewRequest("GET", n.URL()+"/admin/v1/backup", nil)
		req.Header.Set("Authorization", "Bearer "+nodetest.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("backup: %d %s", resp.StatusCode, b)
		}
		_, err = io.Copy(w, resp.Body)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hdr, sum
}

// A backup taken under a running charge load restores on a fresh node:
// every order acknowledged before the backup began is there, those that had
// reached their state answer status byte for byte as before, and the
// restored node, joined by two new ones, forms a healthy cluster.
func TestBackupUnderLoadRestoresOnAFreshNode(t *testing.T) {
	// The restored cluster must open the same cards and secrets: one key.
	keyFile := nodetest.NewKeyFile(t)
	src := nodetest.Start(t, nodetest.Options{KeyFile: keyFile})
	m := src.CreateMerchant(t, 100000)

	// Settled state first: authorised orders whose status no longer moves.
	stable := map[string]string{}
	for i := 0; i < 20; i++ {
		id := newOrderID("bk")
		if r := m.Post(t, "charge", chargeBody(id, "4111111111111111", 1000+int64(i), 24)); r.Status != 200 {
			t.Fatalf("charge: %d %s", r.Status, r.Body)
		}
		stable[id] = ""
	}
	for id := range stable {
		stable[id] = string(m.WaitStatus(t, id, "authorized", 10*time.Second).Body)
	}

	// The load: charges acknowledged one after another, each with the time
	// of its answer, until the test stops it.
	type acked struct {
		id string
		at time.Time
	}
	var (
		mu      sync.Mutex
		ackList []acked
		failed  atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := newOrderID("bkload")
				r, err := m.TryPost("charge", chargeBody(id, "4111111111111111", 500, 24))
				if err != nil || r.Status != 200 {
					failed.Add(1)
					continue
				}
				mu.Lock()
				ackList = append(ackList, acked{id, time.Now()})
				mu.Unlock()
			}
		}()
	}
	waitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(ackList) >= 50 })
	began := time.Now()
	file := filepath.Join(t.TempDir(), "gateway.pgbak")
	hdr, sum := takeBackup(t, src, file)
	// Keep the load on a little after the backup, so it ran through it.
	waitFor(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ackList) > 0 && ackList[len(ackList)-1].at.After(time.Now().Add(-time.Second)) && time.Since(began) > 200*time.Millisecond
	})
	close(stop)
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d charges failed during the backup", f)
	}
	var before []string
	for _, a := range ackList {
		if a.at.Before(began) {
			before = append(before, a.id)
		}
	}
	t.Logf("backup at applied index %d, sha256 %s; %d load charges acknowledged before it, %d in all", hdr.AppliedIndex, sum, len(before), len(ackList))

	// Restore on a fresh node, under another id, in an empty data dir.
	restored := nodetest.Start(t, nodetest.Options{ID: "r1", KeyFile: keyFile, Args: []string{"--restore", file}})
	rm := m.At(restored)
	for id, body := range stable {
		if got := string(rm.Post(t, "status", map[string]any{"order_id": id}).Body); got != body {
			t.Fatalf("order %s after restore:\n got %s\nwant %s", id, got, body)
		}
	}
	for _, id := range before {
		if r := rm.Post(t, "status", map[string]any{"order_id": id}); r.Status != 200 {
			t.Fatalf("order %s, acknowledged before the backup began, is missing after restore: %d %s", id, r.Status, r.Body)
		}
	}
	// The restored cluster takes new charges.
	id := newOrderID("bkafter")
	if r := rm.Post(t, "charge", chargeBody(id, "4111111111111111", 700, 24)); r.Status != 200 {
		t.Fatalf("charge on the restored node: %d %s", r.Status, r.Body)
	}
	rm.WaitStatus(t, id, "authorized", 10*time.Second)

	// Two new nodes join the restored one.
	c := nodetest.ClusterOf(t, keyFile, restored)
	for _, nid := range []string{"r2", "r3"} {
		c.Nodes = append(c.Nodes, nodetest.Start(t, nodetest.Options{ID: nid, KeyFile: keyFile, Join: restored.HTTPAddr}))
	}
	c.WaitMembers(3, 30*time.Second)
	c.WaitConverged(30 * time.Second)
	for oid, body := range stable {
		if got := string(m.At(c.Nodes[2]).Post(t, "status", map[string]any{"order_id": oid}).Body); got != body {
			t.Fatalf("order %s through a joined node:\n got %s\nwant %s", oid, got, body)
		}
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A restore refuses a corrupted or truncated file, and a data dir that
// holds anything, with a clear error and a non-zero exit, writing nothing.
func TestRestoreRefusesBadFilesAndUsedDataDirs(t *testing.T) {
	src := nodetest.Start(t, nodetest.Options{})
	m := src.CreateMerchant(t, 1000)
	m.Post(t, "charge", chargeBody(newOrderID("bk"), "4111111111111111", 1000, 24))
	good := filepath.Join(t.TempDir(), "good.pgbak")
	takeBackup(t, src, good)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	corrupted := append([]byte(nil), data...)
	corrupted[len(corrupted)/2] ^= 0x01
	truncated := data[:len(data)-100]
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "something"), []byte("x"), 0o600)
	for _, tc := range []struct {
		name, file, dataDir, want string
	}{
		{"corrupted", write("corrupted.pgbak", corrupted), "", "checksum does not match"},
		{"truncated", write("truncated.pgbak", truncated), "", "truncated"},
		{"not a backup", write("other.pgbak", bytes.Repeat([]byte("x"), 4096)), "", "not a gateway backup"},
		{"used data dir", good, used, "already holds state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dataDir := tc.dataDir
			if dataDir == "" {
				dataDir = filepath.Join(t.TempDir(), "data")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, nodetest.Binary(t), "--restore", tc.file, "--data-dir", dataDir,
				"--vault-key-file", nodetest.NewKeyFile(t), "--http-addr", nodetest.FreeAddr(t), "--raft-addr", nodetest.FreeAddr(t))
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("gatewayd started from a bad restore:\n%s", out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 || !bytes.Contains(out, []byte(tc.want)) {
				t.Fatalf("want a non-zero exit saying %q, got %v:\n%s", tc.want, err, out)
			}
			if tc.dataDir == "" {
				if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
					t.Fatalf("a refused restore wrote into the data dir: %v", entries)
				}
			}
		})
	}
}

// Scheduled backups land in --backup-dir, each a whole verified file; the
// oldest go beyond --backup-keep, and the metric holds the last success.
func TestScheduledBackupsKeepTheNewest(t *testing.T) {
	dir := t.TempDir()
	n := nodetest.Start(t, nodetest.Options{Args: []string{"--backup-dir", dir, "--backup-interval", "150ms", "--backup-keep", "2"}})
	m := n.CreateMerchant(t, 1000)
	m.Post(t, "charge", chargeBody(newOrderID("sched"), "4111111111111111", 1000, 24))

	seen := map[string]bool{}
	list := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "backup-") {
				names = append(names, e.Name())
				seen[e.Name()] = true
			}
		}
		return names
	}
	// Backups come and go: at least five written, at most two kept.
	waitFor(t, 30*time.Second, func() bool { return len(list()) <= 2 && len(seen) >= 5 })
	names := list()
	if len(names) == 0 {
		t.Fatal("no backup left in --backup-dir")
	}
	newest := names[len(names)-1]
	hdr, _, err := backup.VerifyFile(filepath.Join(dir, newest))
	if err != nil || hdr.AppliedIndex == 0 {
		t.Fatalf("scheduled backup %s: %+v %v", newest, hdr, err)
	}
	resp, err := http.Get(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ts float64
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "gateway_backup_last_success_timestamp_seconds "); ok {
			fmt.Sscan(v, &ts)
		}
	}
	if !strings.Contains(string(body), "\ngateway_backup_interval_seconds 0.15\n") {
		t.Fatal("gateway_backup_interval_seconds does not say --backup-interval (150ms)")
	}
	if now := float64(time.Now().Unix()); ts < now-10 || ts > now+1 {
		t.Fatalf("gateway_backup_last_success_timestamp_seconds = %v, want about %v", ts, now)
	}
}
