package bench

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestGetIsNotRetried: a GET (the ceiling's healthz) that fails is one
// failure, not silently tried again on a new connection: the ceiling is
// the reference of every ratio, so its request and error counts must be
// what happened.
func TestGetIsNotRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			buf := make([]byte, 4096)
			_, _ = conn.Read(buf) // the request, then close without an answer
			conn.Close()
		}
	}()
	c, err := newClient("http://"+ln.Addr().String(), "", "", 1, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := c.get("healthz")
	if a.status != 0 || a.kind == "" {
		t.Errorf("answer %+v, want a transport failure", a)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for one GET: it was retried", n)
	}
}
