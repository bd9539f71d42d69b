package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/node/nodetest"
)

// A node stopped in a process leaves nothing that a later one's /metrics
// reads: the gauges of the first used to stay registered, reading its
// closed store (a panic, "pebble: closed", that killed the process) and
// reporting its actors.
func TestMetricsAfterANodeRestartsInTheSameProcess(t *testing.T) {
	first := startInProcess(t)
	if err := first.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := startInProcess(t)
	defer second.Shutdown(context.Background())
	r, err := http.Get("http://" + second.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("scrape of the second node: %v", err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	for _, name := range []string{"gateway_webhook_pending ", "gateway_order_actors_live ", "gateway_webhook_endpoints "} {
		if strings.Count(string(body), "\n"+name) != 1 {
			t.Errorf("%q is not on /metrics exactly once:\n%s", name, body)
		}
	}
}

// startInProcess starts a development node on free ports in a temporary
// folder and waits until it leads; options change its configuration first.
func startInProcess(t testing.TB, options ...func(*Config)) *Node {
	t.Helper()
	cfg := Defaults()
	cfg.Dev = true
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.RaftAddr = nodetest.FreeAddr(t), nodetest.FreeAddr(t)
	for _, option := range options {
		option(&cfg)
	}
	n, err := Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !n.Ready(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			n.Shutdown(context.Background())
			t.Fatal("the node did not become ready")
		}
	}
	return n
}

// A connection that had sent nothing when the node stopped is not waited
// for; a request it sends afterwards, when the store is closed, is refused
// 503 6.02 (fasthttp serves such connections again once its shutdown has
// stopped waiting for them: a status read there used to read the closed
// store and panic).
func TestRequestAfterShutdownIsRefused(t *testing.T) {
	n := startInProcess(t)
	silent, err := net.Dial("tcp", n.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	time.Sleep(50 * time.Millisecond)
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown with a silent connection open: %v", err)
	}
	fmt.Fprintf(silent, "GET /api/v3/purchase/%s HTTP/1.1\r\nHost: x\r\n\r\n", strings.Repeat("a", 43))
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, _ := io.ReadAll(silent)
	if !bytes.HasPrefix(answer, []byte("HTTP/1.1 503")) || !bytes.Contains(answer, []byte(`"6.02"`)) {
		t.Fatalf("a request after the shutdown: %q, want 503 6.02", answer)
	}
}
