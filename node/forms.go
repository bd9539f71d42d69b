package node

import "github.com/paygate/gateway/transport/server"

// forms configures the hosted payment form and 3-D Secure pages.
func (n *Node) forms() server.FormConfig {
	return server.FormConfig{}
}
