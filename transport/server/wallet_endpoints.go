package server

// WalletDecrypter verifies and decrypts wallet payment credentials
// (walleta-pay, walletb-pay). It is wired by the node from the wallet flags.
type WalletDecrypter interface{}

// walletEndpoints are POST /walleta-pay and /walletb-pay (interface 4.4).
func (s *Server) walletEndpoints() map[string]endpoint {
	return map[string]endpoint{}
}
