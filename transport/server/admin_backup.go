package server

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/apierr"
)

// backupWriteTimeout bounds each write of a backup stream. The server's
// WriteTimeout covers a whole answer, which a large store's backup can
// outlast; the stream pushes the deadline forward as it goes instead.
const backupWriteTimeout = 30 * time.Second

// serveBackup: GET /admin/v1/backup streams a consistent copy of this
// node's state in the backup format (persistence/backup). The view is taken
// before the answer starts, so a node that cannot take one answers 503
// 6.02; a stream that fails later ends without its trailer, which every
// reader refuses as truncated. The X-Backup-Applied-Index header names the
// Raft index of the copy.
func (s *Server) serveBackup(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to take a backup"))
		return
	}
	bctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
	view, err := s.cfg.Cluster.OpenBackup(bctx)
	cancel()
	if err != nil {
		writeError(ctx, s.errorFor("backup", err))
		return
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType("application/octet-stream")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="gateway.pgbak"`)
	ctx.Response.Header.Set("X-Backup-Applied-Index", strconv.FormatUint(view.Header.AppliedIndex, 10))
	conn := ctx.Conn()
	logger := s.cfg.Logger
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer view.Release()
		if _, err := view.Write(&deadlineWriter{w: w, conn: conn}); err != nil {
			logger.Warn("backup stream ended early", "error", err)
			return
		}
		w.Flush()
	})
}

// deadlineWriter moves the connection's write deadline forward before
// each write, so a long stream is cut only when the reader stalls.
type deadlineWriter struct {
	w    *bufio.Writer
	conn net.Conn
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	d.conn.SetWriteDeadline(time.Now().Add(backupWriteTimeout))
	return d.w.Write(p)
}
