package cluster

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/time/rate"
)

// paceChunk is the most a paced write hands on at once; the limiter's burst.
const paceChunk = 256 << 10

// pacer bounds how fast snapshots are written. A snapshot is a copy of the
// whole store (1.4 GB at a million orders): written at the disk's full
// speed it takes the disk from the raft log's fsyncs and Pebble's flushes
// for as long as it lasts, and every request waits on those
// (docs/performance.md). stop ends every wait at once, so that a shutdown
// does not wait for a paced snapshot to finish.
type pacer struct {
	limiter *rate.Limiter
	ctx     context.Context
	stop    context.CancelFunc
}

// newPacer paces to bytesPerSec; nil (no pacing) when it is not positive.
func newPacer(bytesPerSec int64) *pacer {
	if bytesPerSec <= 0 {
		return nil
	}
	ctx, stop := context.WithCancel(context.Background())
	return &pacer{limiter: rate.NewLimiter(rate.Limit(bytesPerSec), paceChunk), ctx: ctx, stop: stop}
}

// writer paces writes to w; a nil pacer returns w itself.
func (p *pacer) writer(w io.Writer) io.Writer {
	if p == nil {
		return w
	}
	return pacedWriter{w: w, p: p}
}

type pacedWriter struct {
	w io.Writer
	p *pacer
}

func (pw pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), paceChunk)]
		if err := pw.p.limiter.WaitN(pw.p.ctx, len(chunk)); err != nil {
			return written, fmt.Errorf("paced snapshot write stopped: %w", err)
		}
		n, err := pw.w.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		b = b[len(chunk):]
	}
	return written, nil
}
