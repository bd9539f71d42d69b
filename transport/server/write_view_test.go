package server

import (
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/order"
)

// writeView renders into the response's own body buffer: the body is the
// view's JSON and nothing of what the buffer held before, whether that was
// longer or shorter.
func TestWriteViewReplacesTheBody(t *testing.T) {
	v := order.NewView(&order.Order{Merchant: "m", ID: "ord-1", Amount: 1250, Currency: "EUR",
		Status: order.StatusAuthorized, Description: "a \"quoted\" description"}, order.WithTxn, "")
	want := v.Marshal()
	for _, before := range []string{"", strings.Repeat("x", 5000), "{}"} {
		var ctx fasthttp.RequestCtx
		ctx.Response.SetBodyString(before)
		writeView(&ctx, v)
		if got := ctx.Response.Body(); !bytes.Equal(got, want) {
			t.Fatalf("body over %d bytes:\n%s\nwant\n%s", len(before), got, want)
		}
		if ctx.Response.StatusCode() != 200 || string(ctx.Response.Header.ContentType()) != "application/json" {
			t.Fatalf("status %d, content type %q", ctx.Response.StatusCode(), ctx.Response.Header.ContentType())
		}
	}
}

// Once the response's buffer has grown to a view's size, writing another
// view allocates nothing (Marshal allocated 1 KB per answer).
func TestWriteViewAllocatesNothing(t *testing.T) {
	v := order.NewView(&order.Order{Merchant: "m", ID: "ord-1", Amount: 1250, Currency: "EUR",
		Status: order.StatusAuthorized}, order.WithTxn, "")
	var ctx fasthttp.RequestCtx
	writeView(&ctx, v)
	if n := testing.AllocsPerRun(100, func() { writeView(&ctx, v) }); n != 0 {
		t.Fatalf("%v allocations per view written", n)
	}
}
