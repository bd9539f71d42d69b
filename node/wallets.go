package node

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/paygate/gateway/transport/server"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// wallets builds the wallet decrypter from the wallet flags (nil when no
// wallet is configured). Each wallet is decided on its own:
//
//   - any of its flags given: all of its flags are required, and its keys
//     are loaded from them (a missing or unreadable file stops the node);
//   - none given and --dev: the development set under
//     <data-dir>/wallet-dev (tokenmaker.DevDirName), generated on the first
//     start and loaded afterwards, is loaded through the same LoadConfig as
//     the flags;
//   - otherwise the wallet is off: its endpoint answers 422, code 2.01,
//     attribute payment_source, "... payments are not configured".
func (n *Node) wallets() (server.WalletDecrypter, error) {
	c := n.cfg
	aFlags := []string{c.WalletAMerchantID, c.WalletAProcessingKeyFile, c.WalletARootCertFile}
	bFlags := []string{c.WalletBRecipientID, c.WalletBPrivateKeyFile, c.WalletBRootKeysFile}
	aSet, err := flagGroup(aFlags, "--walleta-merchant-id, --walleta-processing-key-file and --walleta-root-cert-file")
	if err != nil {
		return nil, err
	}
	bSet, err := flagGroup(bFlags, "--walletb-recipient-id, --walletb-private-key-file and --walletb-root-keys-file")
	if err != nil {
		return nil, err
	}
	if !aSet && !bSet && !c.Dev {
		n.logger.Info("wallet payments off: no wallet flags")
		return nil, nil
	}
	devDir := filepath.Join(c.DataDir, tokenmaker.DevDirName)
	var ds *tokenmaker.DevSet
	if c.Dev && (!aSet || !bSet) {
		if ds, err = tokenmaker.LoadOrGenerateDevSet(devDir); err != nil {
			return nil, fmt.Errorf("wallet development set in %s: %w", devDir, err)
		}
	}

	var keys server.WalletKeys
	switch {
	case aSet:
		cfg, err := walleta.LoadConfig(c.WalletAMerchantID, c.WalletAProcessingKeyFile, c.WalletARootCertFile)
		if err != nil {
			return nil, fmt.Errorf("walleta-pay flags: %w", err)
		}
		keys.A = &cfg
	case ds != nil && ds.A != nil:
		cfg, err := walleta.LoadConfig(ds.A.MerchantID, filepath.Join(devDir, tokenmaker.FileWalletAProcessingKeys),
			filepath.Join(devDir, tokenmaker.FileWalletARootCert))
		if err != nil {
			return nil, fmt.Errorf("walleta-pay development set: %w", err)
		}
		keys.A = &cfg
	}
	switch {
	case bSet:
		cfg, err := walletb.LoadConfig(c.WalletBRecipientID, c.WalletBPrivateKeyFile, c.WalletBRootKeysFile)
		if err != nil {
			return nil, fmt.Errorf("walletb-pay flags: %w", err)
		}
		keys.B = &cfg
	case ds != nil && ds.B != nil:
		cfg, err := walletb.LoadConfig(ds.B.RecipientID, filepath.Join(devDir, tokenmaker.FileWalletBRecipientKey),
			filepath.Join(devDir, tokenmaker.FileWalletBRootKeys))
		if err != nil {
			return nil, fmt.Errorf("walletb-pay development set: %w", err)
		}
		keys.B = &cfg
	}
	source := func(flags bool, on bool) string {
		switch {
		case flags:
			return "flags"
		case on:
			return "dev set " + devDir
		}
		return "off"
	}
	n.logger.Info("wallet payments", "walleta-pay", source(aSet, keys.A != nil), "walletb-pay", source(bSet, keys.B != nil))
	if keys.A == nil && keys.B == nil {
		return nil, nil
	}
	return keys, nil
}

// flagGroup reports whether a wallet's flags are given: none (false), all
// (true), or some, which is an error naming the group.
func flagGroup(values []string, names string) (bool, error) {
	given := 0
	for _, v := range values {
		if v != "" {
			given++
		}
	}
	switch given {
	case 0:
		return false, nil
	case len(values):
		return true, nil
	}
	return false, errors.New(names + " go together: give all of them or none")
}
