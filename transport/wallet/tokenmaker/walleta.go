package tokenmaker

import (
	"crypto"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/paygate/gateway/order/currency"
	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/walleta"
)

// WalletA makes a walleta-pay token of version walleta.VersionEC or
// walleta.VersionRSA for the set's processing key, signed by the set's leaf.
func (ds *DevSet) WalletA(version string, p PaymentInput) (walleta.Token, error) {
	if ds.A == nil {
		return walleta.Token{}, errors.New("tokenmaker: dev set has no walleta-pay half")
	}
	p, err := p.withDefaults(ds.now())
	if err != nil {
		return walleta.Token{}, err
	}
	plain, err := WalletAPayload(p)
	if err != nil {
		return walleta.Token{}, err
	}
	return ds.WalletARaw(version, plain, p)
}

// WalletAPayload is the decrypted JSON of a walleta-pay token for p (p's
// defaults must already be applied when its zero values matter).
func WalletAPayload(p PaymentInput) ([]byte, error) {
	numeric := p.Currency
	if c, ok := currency.Lookup(p.Currency); ok {
		numeric = c.Numeric
	}
	if len(p.ExpYear) != 4 || len(p.ExpMonth) != 2 {
		return nil, errors.New("tokenmaker: ExpYear must have 4 digits and ExpMonth 2")
	}
	y, _ := strconv.Atoi(p.ExpYear)
	m, _ := strconv.Atoi(p.ExpMonth)
	lastDay := time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
	pl := walleta.Payload{
		ApplicationPrimaryAccountNumber: p.PAN,
		ApplicationExpirationDate:       fmt.Sprintf("%s%s%02d", p.ExpYear[2:], p.ExpMonth, lastDay),
		CurrencyCode:                    numeric,
		TransactionAmount:               json.Number(strconv.FormatInt(p.Amount, 10)),
		DeviceManufacturerIdentifier:    "040010030273",
	}
	switch p.AuthMethod {
	case wallet.AuthCryptogram3DS, "", walleta.PaymentDataType3DS:
		pl.PaymentDataType = walleta.PaymentDataType3DS
		pl.PaymentData = walleta.PaymentData{OnlinePaymentCryptogram: p.Cryptogram, EciIndicator: p.ECI}
	case wallet.AuthEMV:
		pl.PaymentDataType = walleta.PaymentDataTypeEMV
		pl.PaymentData = walleta.PaymentData{EmvData: base64.StdEncoding.EncodeToString(randomBytes(32))}
	default:
		return nil, fmt.Errorf("tokenmaker: walleta-pay has no auth method %q", p.AuthMethod)
	}
	return json.Marshal(pl)
}

// WalletARaw makes a walleta-pay token around an arbitrary plaintext (for
// tests of malformed payloads). p supplies the transaction id, application
// data and signing time.
func (ds *DevSet) WalletARaw(version string, plain []byte, p PaymentInput) (walleta.Token, error) {
	a := ds.A
	if a == nil {
		return walleta.Token{}, errors.New("tokenmaker: dev set has no walleta-pay half")
	}
	if p.SigningTime.IsZero() {
		p.SigningTime = ds.now()
	}
	t := walleta.Token{Version: version, Header: walleta.Header{
		TransactionID: p.TransactionID, ApplicationData: p.ApplicationData,
	}}
	if t.Header.TransactionID == "" {
		t.Header.TransactionID = randomHex(32)
	}
	switch version {
	case walleta.VersionEC:
		pub, err := a.ProcessingKeyEC.PublicKey.ECDH()
		if err != nil {
			return t, err
		}
		eph, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			return t, err
		}
		z, err := eph.ECDH(pub)
		if err != nil {
			return t, err
		}
		data, err := walleta.SealGCM(walleta.DeriveKeyEC(z, a.MerchantID), plain)
		if err != nil {
			return t, err
		}
		spki, err := x509.MarshalPKIXPublicKey(eph.PublicKey())
		if err != nil {
			return t, err
		}
		t.Data = base64.StdEncoding.EncodeToString(data)
		t.Header.EphemeralPublicKey = base64.StdEncoding.EncodeToString(spki)
		if err := setPublicKeyHash(&t, &a.ProcessingKeyEC.PublicKey); err != nil {
			return t, err
		}
	case walleta.VersionRSA:
		sym := randomBytes(16)
		wrapped, err := rsa.EncryptOAEP(sha256.New(), rand.Reader, &a.ProcessingKeyRSA.PublicKey, sym, nil)
		if err != nil {
			return t, err
		}
		data, err := walleta.SealGCM(sym, plain)
		if err != nil {
			return t, err
		}
		t.Data = base64.StdEncoding.EncodeToString(data)
		t.Header.WrappedKey = base64.StdEncoding.EncodeToString(wrapped)
		if err := setPublicKeyHash(&t, &a.ProcessingKeyRSA.PublicKey); err != nil {
			return t, err
		}
	default:
		return t, fmt.Errorf("tokenmaker: walleta-pay version %q", version)
	}
	return t, ds.SignWalletA(&t, p.SigningTime)
}

func setPublicKeyHash(t *walleta.Token, pub crypto.PublicKey) error {
	h, err := walleta.PublicKeyHash(pub)
	if err != nil {
		return err
	}
	t.Header.PublicKeyHash = base64.StdEncoding.EncodeToString(h)
	return nil
}

// SignWalletA (re)signs t with the set's leaf certificate and key: a
// detached CMS SignedData over the token's content, BER-encoded with
// indefinite lengths around the certificates as the provider's tokens are.
// Tests use it to make a validly signed token around altered fields.
func (ds *DevSet) SignWalletA(t *walleta.Token, signingTime time.Time) error {
	a := ds.A
	if a == nil {
		return errors.New("tokenmaker: dev set has no walleta-pay half")
	}
	content, err := WalletAContent(*t)
	if err != nil {
		return err
	}
	sig, err := SignCMS(content, a.LeafCert, a.LeafKey, []*x509.Certificate{a.LeafCert, a.IntermediateCert}, signingTime)
	if err != nil {
		return err
	}
	t.Signature = base64.StdEncoding.EncodeToString(sig)
	return nil
}

// WalletAContent is the detached content a walleta-pay signature covers:
// ephemeralPublicKey or wrappedKey ‖ data ‖ transactionId ‖ applicationData,
// decoded.
func WalletAContent(t walleta.Token) ([]byte, error) {
	key := t.Header.EphemeralPublicKey
	if t.Version == walleta.VersionRSA {
		key = t.Header.WrappedKey
	}
	k, err1 := base64.StdEncoding.DecodeString(key)
	d, err2 := base64.StdEncoding.DecodeString(t.Data)
	tx, err3 := hex.DecodeString(t.Header.TransactionID)
	ad, err4 := hex.DecodeString(t.Header.ApplicationData)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("tokenmaker: token fields: %w", err)
	}
	out := append(append(append(k, d...), tx...), ad...)
	return out, nil
}
