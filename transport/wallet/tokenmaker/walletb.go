package tokenmaker

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/paygate/gateway/transport/wallet"
	"github.com/paygate/gateway/transport/wallet/walletb"
)

// WalletB makes a walletb-pay token of version walletb.VersionECv1 or
// walletb.VersionECv2 for the set's recipient key (or p.RecipientID).
func (ds *DevSet) WalletB(version string, p PaymentInput) (walletb.Token, error) {
	if ds.B == nil {
		return walletb.Token{}, errors.New("tokenmaker: dev set has no walletb-pay half")
	}
	p, err := p.withDefaults(ds.now())
	if err != nil {
		return walletb.Token{}, err
	}
	plain, err := WalletBMessage(version, p)
	if err != nil {
		return walletb.Token{}, err
	}
	return ds.WalletBRaw(version, plain, p)
}

// WalletBMessage is the decrypted JSON of a walletb-pay token for p (p's
// defaults must already be applied when its zero values matter).
func WalletBMessage(version string, p PaymentInput) ([]byte, error) {
	month, err1 := strconv.Atoi(p.ExpMonth)
	year, err2 := strconv.Atoi(p.ExpYear)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("tokenmaker: expiry: %w", err)
	}
	m := walletb.Message{
		MessageExpiration: strconv.FormatInt(p.MessageExpiration.UnixMilli(), 10),
		MessageID:         p.TransactionID,
		PaymentMethod:     walletb.PaymentMethodCard,
		PaymentMethodDetails: walletb.PaymentMethodDetails{
			PAN:             p.PAN,
			ExpirationMonth: json.Number(strconv.Itoa(month)),
			ExpirationYear:  json.Number(strconv.Itoa(year)),
		},
	}
	if m.MessageID == "" {
		m.MessageID = "AH2E" + base64.RawURLEncoding.EncodeToString(randomBytes(48))
	}
	if version == walletb.VersionECv2 {
		m.GatewayMerchantID = p.GatewayMerchantID
	}
	switch p.AuthMethod {
	case wallet.AuthCryptogram3DS, "":
		m.PaymentMethodDetails.AuthMethod = walletb.AuthMethodCryptogram
		m.PaymentMethodDetails.Cryptogram = p.Cryptogram
		m.PaymentMethodDetails.EciIndicator = p.ECI
	case wallet.AuthPANOnly:
		m.PaymentMethodDetails.AuthMethod = walletb.AuthMethodPANOnly
	default:
		return nil, fmt.Errorf("tokenmaker: walletb-pay has no auth method %q", p.AuthMethod)
	}
	return json.Marshal(m)
}

// WalletBRaw makes a walletb-pay token around an arbitrary plaintext (for
// tests of malformed messages). p supplies the recipient id and the
// intermediate key's expiration.
func (ds *DevSet) WalletBRaw(version string, plain []byte, p PaymentInput) (walletb.Token, error) {
	b := ds.B
	if b == nil {
		return walletb.Token{}, errors.New("tokenmaker: dev set has no walletb-pay half")
	}
	pub, err := b.RecipientKey.PublicKey.ECDH()
	if err != nil {
		return walletb.Token{}, err
	}
	sm, err := EncryptWalletB(version, pub, plain)
	if err != nil {
		return walletb.Token{}, err
	}
	t := walletb.Token{ProtocolVersion: version, SignedMessage: sm}
	recipient := p.RecipientID
	if recipient == "" {
		recipient = b.RecipientID
	}
	exp := p.IntermediateExpiration
	if exp.IsZero() {
		exp = ds.now().Add(24 * time.Hour)
	}
	return t, ds.SignWalletB(&t, recipient, exp)
}

// EncryptWalletB is the device side of the ECIES-KEM: a fresh ephemeral
// key, ECDH with the recipient, walletb.DeriveKeys, AES-CTR and the HMAC
// tag. It returns the signedMessage JSON.
func EncryptWalletB(version string, recipient *ecdh.PublicKey, plain []byte) (string, error) {
	eph, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	z, err := eph.ECDH(recipient)
	if err != nil {
		return "", err
	}
	ephBytes := eph.PublicKey().Bytes()
	encKey, macKey, err := walletb.DeriveKeys(version, ephBytes, z)
	if err != nil {
		return "", err
	}
	ct, err := walletb.CTR(encKey, plain)
	if err != nil {
		return "", err
	}
	sm, err := json.Marshal(walletb.SignedMessage{
		EncryptedMessage:   base64.StdEncoding.EncodeToString(ct),
		EphemeralPublicKey: base64.StdEncoding.EncodeToString(ephBytes),
		Tag:                base64.StdEncoding.EncodeToString(walletb.Tag(macKey, ct)),
	})
	return string(sm), err
}

// SignWalletB (re)signs t.SignedMessage for recipientID: ECv1 with the
// set's ECv1 root key; ECv2 with the intermediate key, whose signedKey
// (expiring at intermediateExpiration) the ECv2 root key signs. Tests use it
// to make a validly signed token around an altered message.
func (ds *DevSet) SignWalletB(t *walletb.Token, recipientID string, intermediateExpiration time.Time) error {
	b := ds.B
	if b == nil {
		return errors.New("tokenmaker: dev set has no walletb-pay half")
	}
	signed := walletb.SignedString(walletb.SenderID, recipientID, t.ProtocolVersion, t.SignedMessage)
	switch t.ProtocolVersion {
	case walletb.VersionECv1:
		sig, err := signECDSA(b.RootKeys[walletb.VersionECv1], signed)
		if err != nil {
			return err
		}
		t.Signature, t.IntermediateSigningKey = sig, nil
	case walletb.VersionECv2:
		isk, err := ds.WalletBIntermediate(intermediateExpiration)
		if err != nil {
			return err
		}
		sig, err := signECDSA(b.IntermediateKey, signed)
		if err != nil {
			return err
		}
		t.Signature, t.IntermediateSigningKey = sig, isk
	default:
		return fmt.Errorf("tokenmaker: walletb-pay version %q", t.ProtocolVersion)
	}
	return nil
}

// WalletBIntermediate is the set's ECv2 intermediateSigningKey expiring at
// exp, signed by the ECv2 root key.
func (ds *DevSet) WalletBIntermediate(exp time.Time) (*walletb.IntermediateSigningKey, error) {
	b := ds.B
	spki, err := x509.MarshalPKIXPublicKey(&b.IntermediateKey.PublicKey)
	if err != nil {
		return nil, err
	}
	sk, err := json.Marshal(walletb.SignedKey{
		KeyValue:      base64.StdEncoding.EncodeToString(spki),
		KeyExpiration: strconv.FormatInt(exp.UnixMilli(), 10),
	})
	if err != nil {
		return nil, err
	}
	sig, err := signECDSA(b.RootKeys[walletb.VersionECv2], walletb.SignedKeyString(walletb.SenderID, walletb.VersionECv2, string(sk)))
	if err != nil {
		return nil, err
	}
	return &walletb.IntermediateSigningKey{SignedKey: string(sk), Signatures: []string{sig}}, nil
}

func signECDSA(k *ecdsa.PrivateKey, msg []byte) (string, error) {
	if k == nil {
		return "", errors.New("tokenmaker: signing key missing")
	}
	d := sha256.Sum256(msg)
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}
