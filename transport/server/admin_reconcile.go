package server

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/acquirer/reconcile"
	"github.com/paygate/gateway/transport/apierr"
)

// serveReconcile: POST /admin/v1/reconcile with the acquirer's settlement
// report (CSV) as the body answers the reconciliation (reconcile.Result)
// against this node's applied state. With ?acquirer_addr=HOST:PORT the
// gateway's side is the orders routed to that host (their MID's,
// actors.AcquirerAddr), with ?acquirer_addr=default those of the node's
// default acquirer: a node speaking to several hosts reconciles each
// host's report against that host's orders. Without it, every order.
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
	host, only := string(ctx.QueryArgs().Peek("acquirer_addr")), ctx.QueryArgs().Has("acquirer_addr")
	if host == "default" {
		host = ""
	}
	var ours []reconcile.Entry
	if s.cfg.Store.EachOrder(func(o *order.Order) bool {
		if only && actors.AcquirerAddr(s.cfg.Store, o) != host {
			return true
		}
		ours = append(ours, reconcile.Ledger(o)...)
		return true
	}); err != nil {
		writeError(ctx, apierr.New(apierr.Internal, "store", "reading the orders failed"))
		_ = err
		return
	}
	writeJSON(ctx, 200, reconcile.Compare(report, ours))
}
