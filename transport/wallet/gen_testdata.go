//go:build ignore

// gen_testdata writes the known-answer fixtures of walleta/testdata and
// walletb/testdata: a development set (fixed keys, certificates valid for 50
// years from the fixed clock), one token per version and the exact
// plaintext each token encrypts. The tests decrypt the tokens at KATNow and
// compare with the plaintext, so the byte-level construction stays pinned.
//
// Run once from this directory (it overwrites the fixtures):
//
//	go run gen_testdata.go
package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/internal/wallettest"
	"github.com/paygate/gateway/transport/wallet/tokenmaker"
	"github.com/paygate/gateway/transport/wallet/walleta"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// katNow is the fixed clock: signing time of the walleta-pay tokens and
// start of the walletb-pay expirations. The tests read the same variable.
var katNow = wallettest.KATNow

func main() {
	ds, err := tokenmaker.GenerateDevSetWith("", tokenmaker.Options{
		Now:         katNow,
		MerchantID:  "merchant.com.example.kat",
		RecipientID: "gateway:kat",
	})
	if err != nil {
		log.Fatal(err)
	}
	ds.Now = func() time.Time { return katNow }

	a := *ds
	a.B = nil
	must(a.Write("walleta/testdata"))
	for _, c := range []struct {
		version, file string
		in            tokenmaker.PaymentInput
	}{
		{walleta.VersionEC, "ec_v1", tokenmaker.PaymentInput{
			PAN: "4111111111111111", ExpMonth: "07", ExpYear: "2030", Amount: 1999, Currency: "EUR",
			Cryptogram: "AOrZk5yuKk9mAAHVjSzxAAADFA==", ECI: "05",
			TransactionID:   "a3c1f0e2d4b6a8c0e2f4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8",
			ApplicationData: "6b6174206170706c69636174696f6e2064617461",
		}},
		{walleta.VersionRSA, "rsa_v1", tokenmaker.PaymentInput{
			PAN: "5555555555554444", ExpMonth: "11", ExpYear: "2029", Amount: 250, Currency: "USD",
			Cryptogram: "AgAAAAAABk4DWZ4C28yUQAAAAAA=", ECI: "02",
			TransactionID: "0011223344556677889900aabbccddeeff0011223344556677889900aabbccdd",
		}},
	} {
		in, err := tokenmaker.PaymentInputWithDefaults(c.in, katNow)
		must(err)
		plain, err := tokenmaker.WalletAPayload(in)
		must(err)
		tok, err := ds.WalletARaw(c.version, plain, in)
		must(err)
		write("walleta/testdata", c.file, tok, plain)
	}

	b := *ds
	b.A = nil
	must(b.Write("walletb/testdata"))
	for _, c := range []struct {
		version, file string
		in            tokenmaker.PaymentInput
	}{
		{walletb.VersionECv1, "ecv1", tokenmaker.PaymentInput{
			PAN: "4111111111111111", ExpMonth: "12", ExpYear: "2031", AuthMethod: wallet.AuthPANOnly,
			TransactionID: "kat-ecv1-message-id",
		}},
		{walletb.VersionECv2, "ecv2", tokenmaker.PaymentInput{
			PAN: "4895370012003478", ExpMonth: "03", ExpYear: "2030", AuthMethod: wallet.AuthCryptogram3DS,
			Cryptogram: "AAAAAAAAAAAAAAAAAAAAAAAAAAA=", ECI: "05",
			TransactionID: "kat-ecv2-message-id", GatewayMerchantID: "kat-merchant-42",
		}},
	} {
		in, err := tokenmaker.PaymentInputWithDefaults(c.in, katNow)
		must(err)
		plain, err := tokenmaker.WalletBMessage(c.version, in)
		must(err)
		tok, err := ds.WalletBRaw(c.version, plain, in)
		must(err)
		write("walletb/testdata", c.file, tok, plain)
	}
	fmt.Println("fixtures written for", katNow.Format(time.RFC3339))
}

func write(dir, name string, tok any, plain []byte) {
	j, err := json.MarshalIndent(tok, "", "  ")
	must(err)
	must(os.WriteFile(filepath.Join(dir, name+".token.json"), append(j, '\n'), 0o644))
	must(os.WriteFile(filepath.Join(dir, name+".plain.json"), plain, 0o644))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
