package link

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/paygate/gateway/transport/acquirer/host"
)

// The link over an in-memory Pipe to a host in the same process (a node
// without --acquirer-addr): the same answers as over TCP, concurrent
// requests each matched to their own, and a host that goes down and comes
// back is dialled again.
func TestLinkOverAPipe(t *testing.T) {
	h, err := host.Open(host.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := Dial(Config{Addr: "in-process", Timeout: 2 * time.Second, Dial: func(context.Context, string) (net.Conn, error) {
		client, server := Pipe()
		go h.ServeConn(server)
		return client, nil
	}})
	defer c.Close()
	acq := NewAcquirer(c)
	errs := make(chan error, 50)
	for i := range 50 {
		go func() {
			ref := "pipe-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			r, err := acq.Authorize(context.Background(), req(ref, "4111111111111111"))
			if err == nil {
				checkApproved(t, ref, r, "M")
			}
			errs <- err
		}()
	}
	for range 50 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	h.SetFaults(host.Faults{Down: true})
	short := Dial(Config{Addr: "in-process", Timeout: 300 * time.Millisecond, Dial: func(context.Context, string) (net.Conn, error) {
		client, server := Pipe()
		go h.ServeConn(server)
		return client, nil
	}})
	defer short.Close()
	if _, err := NewAcquirer(short).Authorize(context.Background(), req("pipe-down", "4111111111111111")); err == nil {
		t.Fatal("a host that is down answered")
	}
	h.SetFaults(host.Faults{})
	// The connection the down host dropped may still be the link's for the
	// first attempt (connection lost): a caller repeats, as the actors do.
	waitFor(t, "an authorisation after the host came back", func() bool {
		_, err := NewAcquirer(short).Authorize(context.Background(), req("pipe-up", "4111111111111111"))
		return err == nil
	})
}

// Pipe's ends behave as a socket's: bytes arrive in order and several
// writes are read at once; a closed end reads what was written, then EOF,
// and the other's writes fail; deadlines time out; a full buffer blocks
// the writer until it is read.
func TestPipe(t *testing.T) {
	a, b := Pipe()
	a.Write([]byte("abc"))
	a.Write([]byte("def"))
	buf := make([]byte, 16)
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "abcdef" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := b.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v", err)
	}
	b.SetReadDeadline(time.Time{})

	big := make([]byte, pipeBufferMax)
	a.Write(big) // fills the buffer
	a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := a.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a full buffer: %v", err)
	}
	a.SetWriteDeadline(time.Time{})
	wrote := make(chan error, 1)
	go func() { _, err := a.Write([]byte("tail")); wrote <- err }()
	rest := make([]byte, 64<<10)
	for got := 0; got < pipeBufferMax+len("tail"); {
		n, err := b.Read(rest)
		if err != nil {
			t.Fatal(err)
		}
		got += n
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the blocked write: %v", err)
	}

	a.Write([]byte("last"))
	a.Close()
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "last" {
		t.Fatalf("after the writer closed: %q %v", buf[:n], err)
	}
	if _, err := b.Read(buf); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
	if _, err := b.Write([]byte("x")); err == nil {
		t.Fatal("a write to a closed end succeeded")
	}
	if _, err := a.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on the closed end: %v", err)
	}
}
