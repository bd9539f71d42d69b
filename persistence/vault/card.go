package vault

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Card is the card data kept at rest. There is deliberately no CVV field:
// the card verification value is never stored (contract section 8).
type Card struct {
	PAN        string
	ExpMonth   string
	ExpYear    string
	HolderName string
}

// cardFormat1 is the version byte of the card encoding: the version followed
// by PAN, ExpMonth, ExpYear and HolderName, each as a uvarint length and bytes.
const cardFormat1 = 1

// maxCardField bounds each encoded field; real values are far shorter.
const maxCardField = 1 << 10

// errCardEncoding reports a decrypted card record that does not decode.
var errCardEncoding = errors.New("vault: malformed card record")

func encodeCard(c Card) ([]byte, error) {
	fields := [...]string{c.PAN, c.ExpMonth, c.ExpYear, c.HolderName}
	n := 1
	for _, f := range fields {
		if len(f) > maxCardField {
			return nil, fmt.Errorf("vault: card field longer than %d bytes", maxCardField)
		}
		n += binary.MaxVarintLen16 + len(f)
	}
	b := make([]byte, 0, n)
	b = append(b, cardFormat1)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b, nil
}

func decodeCard(b []byte) (Card, error) {
	if len(b) < 1 || b[0] != cardFormat1 {
		return Card{}, errCardEncoding
	}
	b = b[1:]
	var fields [4]string
	for i := range fields {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > maxCardField || l > uint64(len(b)-n) {
			return Card{}, errCardEncoding
		}
		fields[i] = string(b[n : n+int(l)])
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return Card{}, errCardEncoding
	}
	return Card{PAN: fields[0], ExpMonth: fields[1], ExpYear: fields[2], HolderName: fields[3]}, nil
}

// SealCard encodes c compactly and seals it bound to aad (e.g. AAD(merchantID,
// cardID)).
func (v *Vault) SealCard(c Card, aad []byte) ([]byte, error) {
	plain, err := encodeCard(c)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	return v.Seal(plain, aad)
}

// OpenCard opens a blob made by SealCard with the same aad.
func (v *Vault) OpenCard(blob, aad []byte) (Card, error) {
	plain, err := v.Open(blob, aad)
	if err != nil {
		return Card{}, err
	}
	defer clear(plain)
	return decodeCard(plain)
}
