package server

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/transport/apierr"
)

// Every domain rejection has its catalogue entry here, the one place that
// maps them, and a rejection listing several attributes keeps them all.
func TestRejectionError(t *testing.T) {
	want := map[order.RejectKind]apierr.Code{
		order.RejectIllegalStatus: apierr.IllegalStatus,
		order.RejectAmount:        apierr.AmountInvalid,
		order.RejectConflict:      apierr.Conflict,
		order.RejectNotFound:      apierr.NotFound,
		order.RejectReplay:        apierr.Invalid,
		order.RejectInvalid:       apierr.Invalid,
		order.RejectCVV:           apierr.CVVInvalid,
		order.RejectTokenInvalid:  apierr.TokenInvalid,
		order.RejectCurrency:      apierr.CurrencyInvalid,
	}
	for k := order.RejectNone + 1; k <= order.RejectCurrency; k++ {
		code, ok := want[k]
		if !ok {
			t.Fatalf("rejection kind %d has no expected code in this test", k)
		}
		e := rejectionError(&order.Rejection{Kind: k, Attribute: "a", Message: "m"})
		if e.Code != code || len(e.Messages["a"]) != 1 {
			t.Errorf("kind %d: got %+v, want code %s/%d", k, e, code.Code, code.HTTP)
		}
	}
	e := rejectionError(&order.Rejection{Kind: order.RejectInvalid, Attribute: "a", Message: "m",
		More: []order.Fault{{Attribute: "b", Message: "n"}}})
	if len(e.Messages) != 2 || e.Messages["b"][0] != "n" {
		t.Fatalf("More lost: %+v", e.Messages)
	}
}

// The admin API refuses a missing or wrong bearer credential with the
// catalogue's admin entry, 401 1.01 on authorization, before routing.
func TestAdminTokenRefusedWithTheCatalogueCode(t *testing.T) {
	s := &Server{cfg: Config{AdminToken: "right"}}
	for _, header := range []string{"", "Bearer wrong", "right"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/admin/v1/merchants")
		if header != "" {
			ctx.Request.Header.Set("Authorization", header)
		}
		s.serveAdmin(&ctx, "merchants")
		want := `{"error":{"code":"` + apierr.AdminAuth.Code + `","messages":{"authorization":["admin bearer token or operator session missing, wrong or expired"]}}}`
		if ctx.Response.StatusCode() != apierr.AdminAuth.HTTP || string(ctx.Response.Body()) != want {
			t.Errorf("Authorization %q: %d %s", header, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
