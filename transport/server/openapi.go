package server

import (
	"github.com/valyala/fasthttp"

	"github.com/paygate/gateway/docs"
	"github.com/paygate/gateway/transport/apierr"
)

// openAPIPath serves the merchant API's OpenAPI document (docs/openapi.yaml),
// unsigned: it is public, like the documentation it is generated into.
const openAPIPath = "/api/v3/openapi.yaml"

func serveOpenAPI(ctx *fasthttp.RequestCtx) {
	if m := string(ctx.Method()); m != fasthttp.MethodGet && m != fasthttp.MethodHead {
		writeError(ctx, apierr.New(apierr.MethodNotAllowed, "method", "use GET for this path"))
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/yaml")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=300")
	ctx.SetBody(docs.OpenAPI)
}
