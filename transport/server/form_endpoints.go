package server

import "github.com/valyala/fasthttp"

// FormConfig configures the hosted payment form and the sandbox 3-D Secure
// pages (contract sections 1 and 9a).
type FormConfig struct{}

// formEndpoints are the signed operations of the hosted form (init-payment).
func (s *Server) formEndpoints() map[string]endpoint {
	return map[string]endpoint{}
}

// servePages serves the unsigned pages and the form's own calls under
// /api/v3/purchase/{token}/... and /api/v3/3ds/...; it reports whether it
// answered.
func (s *Server) servePages(ctx *fasthttp.RequestCtx, path string) bool {
	return false
}
