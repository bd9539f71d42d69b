package server

import (
	"context"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/transport/apierr"
	"github.com/paygate/gateway/transport/webhook"
)

// webhooksListMax bounds one listing.
const webhooksListMax = 1000

// serveWebhooks: GET /admin/v1/webhooks?merchant_id=&order_id= lists
// deliveries; POST /admin/v1/webhooks/{id}/redeliver sends one again.
func (s *Server) serveWebhooks(ctx *fasthttp.RequestCtx, rest string) {
	if rest == "" {
		if !ctx.IsGet() {
			writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET to list deliveries"))
			return
		}
		args := ctx.QueryArgs()
		merchant, orderID := string(args.Peek("merchant_id")), string(args.Peek("order_id"))
		if merchant == "" {
			writeError(ctx, apierr.New(apierr.Invalid, "merchant_id", "merchant_id is required"))
			return
		}
		list, err := s.cfg.Store.Notifications(merchant, orderID, webhooksListMax)
		if err != nil {
			writeError(ctx, s.errorFor("list webhooks", err))
			return
		}
		out := make([]webhook.AdminView, 0, len(list))
		for _, n := range list {
			out = append(out, webhook.NewAdminView(n))
		}
		writeJSON(ctx, 200, map[string]any{"deliveries": out})
		return
	}
	id, ok := strings.CutSuffix(rest, "/redeliver")
	ctx.SetUserValue(auditTargetKey, "notification:"+id)
	if !ok || id == "" || strings.Contains(id, "/") {
		writeError(ctx, apierr.New(apierr.UnknownPath, "path", "no such admin route"))
		return
	}
	if !ctx.IsPost() {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use POST to redeliver"))
		return
	}
	v, aerr := s.redeliver(ctx, id)
	if aerr != nil {
		writeError(ctx, aerr)
		return
	}
	writeJSON(ctx, 200, v)
}

// redeliver schedules notification id for another attempt now (on the
// leader: the admin API and the dashboard forward their writes there).
func (s *Server) redeliver(ctx context.Context, id string) (webhook.AdminView, *apierr.Error) {
	n, err := s.cfg.Store.Notification(id)
	if err != nil {
		return webhook.AdminView{}, s.errorFor("redeliver", err)
	}
	if n == nil {
		return webhook.AdminView{}, apierr.New(apierr.NotFound, "id", "no delivery with that id")
	}
	res, err := s.cfg.Cluster.Propose(ctx, &command.Cmd{Notify: &command.NotifyUpdate{
		ID: id, Time: s.cfg.Now().UnixNano(), Redeliver: true}})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return webhook.AdminView{}, s.errorFor("redeliver", err)
	}
	if s.cfg.OnNotify != nil {
		s.cfg.OnNotify()
	}
	return webhook.NewAdminView(res.Notification), nil
}
