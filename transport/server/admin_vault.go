package server

import (
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/transport/apierr"
)

// serveVault: GET /admin/v1/vault answers {"records_under_previous_key":N},
// counted now on this node: the card blobs and merchant secrets its store
// holds that the current vault key did not seal. At 0 on every node the
// previous key can be dropped (docs/security.md).
func (s *Server) serveVault(ctx *fasthttp.RequestCtx) {
	if !ctx.IsGet() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET"))
		return
	}
	if s.cfg.VaultCount == nil {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
		return
	}
	n, err := s.cfg.VaultCount()
	if err != nil {
		writeError(ctx, s.errorFor("vault count", err))
		return
	}
	writeJSON(ctx, 200, map[string]int{"records_under_previous_key": n})
}
