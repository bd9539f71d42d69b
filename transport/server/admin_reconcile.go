package server

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/acquirer/reconcile"
	"github.com/paygate/gateway/transport/apierr"
)

// serveReconcile: POST /admin/v1/reconcile with the acquirer's settlement
// report (CSV) as the body answers the reconciliation (reconcile.Result)
// against this node's applied state.
func (s *Server) serveReconcile(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST with the settlement report as the body"))
		return
	}
	report, err := reconcile.ParseReport(bytes.NewReader(ctx.PostBody()))
	if err != nil {
		writeError(ctx, apierr.New(apierr.BadBody, "body", err.Error()))
		return
	}
	var ours []reconcile.Entry
	if s.cfg.Store.EachOrder(func(o *order.Order) bool {
		ours = append(ours, reconcile.Ledger(o)...)
		return true
	}); err != nil {
		writeError(ctx, apierr.New(apierr.Internal, "store", "reading the orders failed"))
		_ = err
		return
	}
	writeJSON(ctx, 200, reconcile.Compare(report, ours))
}
