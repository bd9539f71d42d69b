package link

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Pipe is an in-memory connection for a host in the same process (a node
// without --acquirer-addr runs the sandbox host in-process,
// docs/acquirer.md): the link and the host speak through it exactly as
// over TCP (the same frames, codec, STAN matching and host code), without
// the kernel: on a loopback socket the four system calls and two netpoller
// wake-ups of each message were the largest part of the link's CPU.
//
// Unlike net.Pipe it is buffered: a write copies into the other end's
// buffer and returns (it blocks only while pipeBufferMax bytes wait
// unread), so the writer does not wait for the reader's goroutine to run,
// and a read takes everything buffered, several frames at once, as a
// socket read does under load. Deadlines work as on a socket, except that
// a deadline set while a read or write is blocked applies from its next
// wait (nothing here relies on it: the link and host close the connection
// to end a blocked call).
func Pipe() (client, server net.Conn) {
	a, b := newPipeBuffer(), newPipeBuffer()
	return &pipeConn{in: a, out: b, local: pipeAddr("client"), remote: pipeAddr("host")},
		&pipeConn{in: b, out: a, local: pipeAddr("host"), remote: pipeAddr("client")}
}

// pipeBufferMax bounds the bytes one direction holds unread.
const pipeBufferMax = 1 << 20

// pipeBuffer is one direction of a Pipe.
type pipeBuffer struct {
	mu     sync.Mutex
	data   []byte
	off    int           // data[off:] is unread
	eof    bool          // the writing end closed: EOF once drained
	gone   bool          // the reading end closed: writes fail
	ready  chan struct{} // 1-buffered: data, eof or gone
	spaced chan struct{} // 1-buffered: room freed, or gone
}

func newPipeBuffer() *pipeBuffer {
	return &pipeBuffer{ready: make(chan struct{}, 1), spaced: make(chan struct{}, 1)}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

type pipeConn struct {
	in, out       *pipeBuffer
	local, remote net.Addr
	readDeadline  atomic.Int64 // Unix ns; 0 = none
	writeDeadline atomic.Int64
	closed        atomic.Bool
	closeOnce     sync.Once
}

func (c *pipeConn) Read(b []byte) (int, error) {
	p := c.in
	for {
		if c.closed.Load() {
			return 0, net.ErrClosed
		}
		p.mu.Lock()
		if p.off < len(p.data) {
			n := copy(b, p.data[p.off:])
			p.off += n
			if p.off == len(p.data) {
				p.data, p.off = p.data[:0], 0
			}
			p.mu.Unlock()
			signal(p.spaced)
			return n, nil
		}
		eof := p.eof
		p.mu.Unlock()
		if eof {
			return 0, io.EOF
		}
		if err := wait(p.ready, &c.readDeadline); err != nil {
			return 0, err
		}
	}
}

func (c *pipeConn) Write(b []byte) (int, error) {
	p := c.out
	for {
		if c.closed.Load() {
			return 0, net.ErrClosed
		}
		p.mu.Lock()
		if p.gone {
			p.mu.Unlock()
			return 0, io.ErrClosedPipe
		}
		if len(p.data)-p.off < pipeBufferMax {
			p.data = append(p.data, b...)
			room := len(p.data)-p.off < pipeBufferMax
			p.mu.Unlock()
			signal(p.ready)
			if room {
				signal(p.spaced) // another writer waiting may go on
			}
			return len(b), nil
		}
		p.mu.Unlock()
		if err := wait(p.spaced, &c.writeDeadline); err != nil {
			return 0, err
		}
	}
}

// wait receives from ch, or fails when the deadline passes.
func wait(ch chan struct{}, deadline *atomic.Int64) error {
	d := deadline.Load()
	if d == 0 {
		<-ch
		return nil
	}
	left := time.Until(time.Unix(0, d))
	if left <= 0 {
		return os.ErrDeadlineExceeded
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return os.ErrDeadlineExceeded
	}
}

// Close ends both directions: the other end reads what was written, then
// EOF, and its writes fail; a read or write blocked here returns.
func (c *pipeConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.in.mu.Lock()
		c.in.gone = true
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.eof = true
		c.out.mu.Unlock()
		for _, ch := range []chan struct{}{c.in.ready, c.in.spaced, c.out.ready, c.out.spaced} {
			signal(ch)
		}
	})
	return nil
}

func (c *pipeConn) LocalAddr() net.Addr  { return c.local }
func (c *pipeConn) RemoteAddr() net.Addr { return c.remote }

func (c *pipeConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *pipeConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(unixNano(t))
	return nil
}

func (c *pipeConn) SetWriteDeadline(t time.Time) error {
	c.writeDeadline.Store(unixNano(t))
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// pipeAddr names an end of a Pipe.
type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return "in-process-" + string(a) }
