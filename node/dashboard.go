package node

import (
	"log/slog"

	"github.com/paygate/gateway/transport/dashboard"
	"github.com/paygate/gateway/transport/operator"
)

// mountDashboard serves the back office at /dashboard/ (contract 13) over
// the front end's BackOffice and the node's operators.
func (n *Node) mountDashboard(logger *slog.Logger) {
	n.server.SetDashboard(dashboard.New(dashboard.Config{
		Backend: n.server.BackOffice(), Auth: n.operators(), Logger: logger,
	}).Handler)
}

// operators is the node's operator.Authenticator, the one place the
// dashboard's sign-in is wired: the front end's replicated sessions
// (transport/server/sessions.go).
func (n *Node) operators() operator.Authenticator { return n.Authenticator() }
