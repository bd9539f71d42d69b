package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygate/gateway/internal/heapstats"
)

// A receiver may announce a body of up to MaxResponseBytes and then stall:
// the memory an attempt holds follows the bytes that actually arrive, never
// the announced length. 48 attempts each answered "200, Content-Length:
// 1 MiB" and one byte, all waiting for the rest: reserving what was
// announced would hold 48 MiB.
func TestDeliverDoesNotReserveAnnouncedBody(t *testing.T) {
	const (
		attempts  = 48
		announced = DefaultMaxResponseBytes
	)
	var answered atomic.Int64
	release := make(chan struct{})
	addr := rawReceiver(t, func(conn net.Conn) {
		defer conn.Close()
		readRequest(conn)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", announced)
		answered.Add(1)
		<-release
	})
	c, _ := clientFor(t, Config{ResponseTimeout: 30 * time.Second}, addr)
	var bodiesBegun atomic.Int64 // attempts that have read their body's first byte
	c.bodyRead = func() { bodiesBegun.Add(1) }

	heap := func() uint64 { return heapstats.AfterGC().HeapAlloc }
	before := heap()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	results := make([]Attempt, attempts)
	for i := range attempts {
		wg.Go(func() { results[i] = c.Deliver(ctx, testDelivery("http://"+addr.String()+"/")) })
	}
	// Every attempt has read the first byte of its body: whatever it
	// reserves for the body it has reserved by then.
	for deadline := time.Now().Add(10 * time.Second); bodiesBegun.Load() < attempts; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("%d of %d receivers answered, %d attempts read a body byte", answered.Load(), attempts, bodiesBegun.Load())
		}
	}
	during := heap()
	close(release)
	cancel()
	wg.Wait()

	grown := int64(during) - int64(before)
	t.Logf("heap %d → %d KiB with %d attempts each announced %d KiB", before>>10, during>>10, attempts, announced>>10)
	if limit := int64(attempts * announced / 8); grown > limit {
		t.Errorf("heap grew by %d KiB while %d attempts waited for announced bodies: the announced %d KiB each was reserved (want under %d KiB in all)",
			grown>>10, attempts, announced>>10, limit>>10)
	}
	for _, a := range results {
		if a.Delivered || a.HTTPCode != 200 {
			t.Fatalf("a stalled body was %+v, want not delivered with HTTP 200", a)
		}
	}
}

// A body that arrives slowly, in pieces, is read whole and judged as before:
// growing the buffer as bytes come keeps the limit and the verdict.
func TestDeliverBodyArrivingInPieces(t *testing.T) {
	body := `{"echo":"` + strings.Repeat("x", 20<<10) + `","status":"ok"}`
	for name, chunked := range map[string]bool{"content-length": false, "chunked": true} {
		addr := rawReceiver(t, func(conn net.Conn) {
			defer conn.Close()
			readRequest(conn)
			if chunked {
				io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			} else {
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(body))
			}
			for rest := body; len(rest) > 0; {
				n := min(len(rest), 3000)
				if chunked {
					fmt.Fprintf(conn, "%x\r\n%s\r\n", n, rest[:n])
				} else {
					io.WriteString(conn, rest[:n])
				}
				rest = rest[n:]
				time.Sleep(2 * time.Millisecond)
			}
			if chunked {
				io.WriteString(conn, "0\r\n\r\n")
			}
		})
		c, _ := clientFor(t, Config{}, addr)
		if a := c.Deliver(context.Background(), testDelivery("http://"+addr.String()+"/")); !a.Delivered {
			t.Errorf("%s: %+v, want delivered", name, a)
		}
	}
}
