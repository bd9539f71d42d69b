package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

func init() {
	register("wallet-token", "make a walleta-pay or walletb-pay payment_source from a development set", func(args []string) int {
		return walletToken(args, os.Stdout, os.Stderr)
	})
	register("wallet-dev-set", "write a new wallet development set (one set shared by every node of a cluster)", func(args []string) int {
		return walletDevSet(args, os.Stdout, os.Stderr)
	})
}

// walletToken prints the payment_source JSON of a valid token made with the
// provider keys of a development set (what gatewayd --dev writes under
// <data-dir>/wallet-dev). It never prints the card number.
func walletToken(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatewayctl wallet-token", flag.ContinueOnError)
	dir := fs.String("dev-dir", filepath.Join("data", tokenmaker.DevDirName), "the development set (gatewayd --dev writes it under <data-dir>/"+tokenmaker.DevDirName+")")
	walletType := fs.String("wallet", wallet.WalletA, "walleta-pay or walletb-pay")
	version := fs.String("version", "", "EC_v1 or RSA_v1 (walleta-pay, default EC_v1); ECv1 or ECv2 (walletb-pay, default ECv2)")
	pan := fs.String("pan", "4111111111111111", "card number inside the token (never printed)")
	expMonth := fs.String("exp-month", "12", "expiry month, 01-12")
	expYear := fs.String("exp-year", "", "expiry year, 4 digits (default: 3 years from now)")
	amount := fs.Int64("amount", 1000, "walleta-pay: amount in minor units; must equal the order's amount")
	currency := fs.String("currency", "USD", "walleta-pay: ISO-4217 code; must equal the order's currency")
	auth := fs.String("auth-method", wallet.AuthCryptogram3DS, "CRYPTOGRAM_3DS, PAN_ONLY (walletb-pay) or EMV (walleta-pay)")
	merchantID := fs.String("merchant-id", "mer_dev", "walletb-pay ECv2: gatewayMerchantId, the paying merchant's merchant_id")
	txID := fs.String("transaction-id", "", "walleta-pay transactionId (hex) or walletb-pay messageId (default random; each may pay one order)")
	request := fs.String("order-id", "", "print a whole wallet request body for this order_id instead of payment_source alone")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	ds, err := tokenmaker.LoadDevSet(*dir)
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl wallet-token: load development set %s: %v\n(start gatewayd --dev once, or run gatewayctl wallet-dev-set)\n", *dir, err)
		return 1
	}
	in := tokenmaker.PaymentInput{
		PAN: *pan, ExpMonth: *expMonth, ExpYear: *expYear, Amount: *amount, Currency: strings.ToUpper(*currency),
		AuthMethod: *auth, TransactionID: *txID, GatewayMerchantID: *merchantID,
	}
	var source map[string]any
	switch *walletType {
	case wallet.WalletA:
		v := *version
		if v == "" {
			v = walleta.VersionEC
		}
		if v != walleta.VersionEC && v != walleta.VersionRSA {
			fmt.Fprintf(stderr, "gatewayctl wallet-token: walleta-pay --version is EC_v1 or RSA_v1, not %q\n", v)
			return 2
		}
		t, err := ds.WalletA(v, in)
		if err != nil {
			fmt.Fprintln(stderr, "gatewayctl wallet-token:", err)
			return 1
		}
		source = tokenmaker.PaymentSourceA(t)
	case wallet.WalletB:
		v := *version
		if v == "" {
			v = walletb.VersionECv2
		}
		if v != walletb.VersionECv1 && v != walletb.VersionECv2 {
			fmt.Fprintf(stderr, "gatewayctl wallet-token: walletb-pay --version is ECv1 or ECv2, not %q\n", v)
			return 2
		}
		t, err := ds.WalletB(v, in)
		if err != nil {
			fmt.Fprintln(stderr, "gatewayctl wallet-token:", err)
			return 1
		}
		source = tokenmaker.PaymentSourceB(t)
	default:
		fmt.Fprintf(stderr, "gatewayctl wallet-token: --wallet is walleta-pay or walletb-pay, not %q\n", *walletType)
		return 2
	}
	var out any = source
	if *request != "" {
		out = map[string]any{
			"order_id": *request, "amount": *amount, "currency": strings.ToUpper(*currency),
			"order_description": "wallet payment", "processing_mid": "mid-1",
			"settle":         map[string]any{"delay_hours": 24},
			"customer":       map[string]any{"user_id": "u1", "email": "u1@example.com", "ip_address": "203.0.113.7"},
			"payment_source": source,
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl wallet-token:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// walletDevSet writes a new development set to a directory that holds none,
// for a cluster whose nodes must share one (pass its files as wallet flags).
func walletDevSet(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatewayctl wallet-dev-set", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the set to (must not hold one already)")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "gatewayctl wallet-dev-set: --dir is required")
		return 2
	}
	if _, err := os.Stat(filepath.Join(*dir, tokenmaker.FileWalletAMerchantID)); err == nil {
		fmt.Fprintf(stderr, "gatewayctl wallet-dev-set: %s already holds a development set\n", *dir)
		return 1
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintln(stderr, "gatewayctl wallet-dev-set:", err)
		return 1
	}
	ds, err := tokenmaker.GenerateDevSet(*dir)
	if err != nil {
		fmt.Fprintln(stderr, "gatewayctl wallet-dev-set:", err)
		return 1
	}
	p := func(name string) string { return filepath.Join(*dir, name) }
	fmt.Fprintf(stdout, `Wallet development set written to %s (development only: private keys unencrypted).
gatewayd flags:
  --walleta-merchant-id %s
  --walleta-processing-key-file %s
  --walleta-root-cert-file %s
  --walletb-recipient-id %s
  --walletb-private-key-file %s
  --walletb-root-keys-file %s
Valid until %s.
`, *dir, ds.A.MerchantID, p(tokenmaker.FileWalletAProcessingKeys), p(tokenmaker.FileWalletARootCert),
		ds.B.RecipientID, p(tokenmaker.FileWalletBRecipientKey), p(tokenmaker.FileWalletBRootKeys),
		ds.A.RootCert.NotAfter.Format(time.DateOnly))
	return 0
}
