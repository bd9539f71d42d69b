package node

import "github.com/paygate/gateway/transport/server"

// wallets builds the wallet decrypter from the wallet flags (nil when no
// wallet is configured). With --dev it makes a development key set under
// the data dir.
func (n *Node) wallets() (server.WalletDecrypter, error) {
	return nil, nil
}
