package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func testKEK(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func testVault(t *testing.T) *Vault {
	t.Helper()
	v, err := New(testKEK(t))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var testCard = Card{PAN: "4111111111111111", ExpMonth: "12", ExpYear: "2031", HolderName: "JANE Q PUBLIC"}

func TestNewKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33, 64} {
		if _, err := New(make([]byte, n)); err == nil {
			t.Errorf("New with %d-byte key: want error", n)
		}
	}
	if _, err := New(make([]byte, 32)); err != nil {
		t.Errorf("New with 32-byte key: %v", err)
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	v := testVault(t)
	aad := AAD("merchant-1", "card-1")
	for _, pt := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte("abc"), 1000)} {
		blob, err := v.Seal(pt, aad)
		if err != nil {
			t.Fatal(err)
		}
		if want := offData + len(pt) + tagSize; len(blob) != want {
			t.Errorf("blob length %d, want %d", len(blob), want)
		}
		if blob[0] != version1 {
			t.Errorf("version byte %d", blob[0])
		}
		if id := v.KeyID(); !bytes.Equal(blob[1:9], id[:]) {
			t.Errorf("key id not in blob header")
		}
		got, err := v.Open(blob, aad)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, pt) {
			t.Errorf("round trip: got %q want %q", got, pt)
		}
	}
}

func TestCardRoundTrip(t *testing.T) {
	v := testVault(t)
	aad := AAD("merchant-1", "card-1")
	cards := []Card{
		testCard,
		{},
		{PAN: "378282246310005", ExpMonth: "01", ExpYear: "2030", HolderName: "Zoë Ñandú-O'Brien"},
	}
	for _, c := range cards {
		blob, err := v.SealCard(c, aad)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.OpenCard(blob, aad)
		if err != nil {
			t.Fatal(err)
		}
		if got != c {
			t.Errorf("got %+v want %+v", got, c)
		}
	}
	if _, err := v.SealCard(Card{HolderName: strings.Repeat("x", maxCardField+1)}, aad); err == nil {
		t.Error("oversized field: want error")
	}
}

func TestCardEncodingCompactAndStrict(t *testing.T) {
	b, err := encodeCard(testCard)
	if err != nil {
		t.Fatal(err)
	}
	want := 1 + 4 + len(testCard.PAN) + len(testCard.ExpMonth) + len(testCard.ExpYear) + len(testCard.HolderName)
	if len(b) != want {
		t.Errorf("encoded length %d, want %d", len(b), want)
	}
	bad := [][]byte{
		nil,
		{2},
		b[:len(b)-1],
		append(bytes.Clone(b), 0),
		{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for i, x := range bad {
		if _, err := decodeCard(x); err == nil {
			t.Errorf("case %d: decode of malformed record succeeded", i)
		}
	}
}

func TestSealDiffers(t *testing.T) {
	v := testVault(t)
	aad := AAD("m", "c")
	a, err := v.SealCard(testCard, aad)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.SealCard(testCard, aad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same card are identical")
	}
	if bytes.Equal(a[offWrapped:offDataNon], b[offWrapped:offDataNon]) {
		t.Error("wrapped data keys identical")
	}
	if bytes.Equal(a[offData:], b[offData:]) {
		t.Error("ciphertexts identical")
	}
}

func TestBlobHasNoPAN(t *testing.T) {
	v := testVault(t)
	pans := []string{"4111111111111111", "5555555555554444", "378282246310005"}
	for _, pan := range pans {
		c := testCard
		c.PAN = pan
		for range 20 {
			blob, err := v.SealCard(c, AAD("m", "c"))
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range []string{pan, pan[:6], pan[len(pan)-4:] + c.ExpYear, c.HolderName} {
				if bytes.Contains(blob, []byte(enc)) {
					t.Fatalf("sealed blob contains %q", enc)
				}
			}
			if bytes.Contains([]byte(hex.EncodeToString(blob)), []byte(pan)) ||
				strings.Contains(base64.StdEncoding.EncodeToString(blob), pan) {
				t.Fatal("encoded blob contains the PAN")
			}
		}
	}
}

func TestTamperFails(t *testing.T) {
	v := testVault(t)
	aad := AAD("merchant-1", "card-1")
	blob, err := v.SealCard(testCard, aad)
	if err != nil {
		t.Fatal(err)
	}
	// Flip every single byte in turn: nothing may open.
	for i := range blob {
		bad := bytes.Clone(blob)
		bad[i] ^= 0x01
		if _, err := v.Open(bad, aad); err == nil {
			t.Fatalf("blob with byte %d flipped opened", i)
		}
	}
	named := []struct {
		name string
		off  int
		want error
	}{
		{"version", 0, ErrMalformed},
		{"key id", 1, ErrUnknownKey},
		{"wrap nonce", offWrapNon, ErrDecrypt},
		{"wrapped key", offWrapped + 3, ErrDecrypt},
		{"wrapped key tag", offDataNon - 1, ErrDecrypt},
		{"data nonce", offDataNon, ErrDecrypt},
		{"ciphertext", offData + 2, ErrDecrypt},
		{"data tag", len(blob) - 1, ErrDecrypt},
	}
	for _, tc := range named {
		bad := bytes.Clone(blob)
		bad[tc.off] ^= 0x80
		if _, err := v.OpenCard(bad, aad); !errors.Is(err, tc.want) {
			t.Errorf("%s tampered: err %v, want %v", tc.name, err, tc.want)
		}
	}
	// Truncations and extensions.
	for _, bad := range [][]byte{nil, blob[:1], blob[:minBlobSize-1], blob[:len(blob)-1], append(bytes.Clone(blob), 0)} {
		if _, err := v.Open(bad, aad); err == nil {
			t.Errorf("blob of length %d opened", len(bad))
		}
	}
	// A wrapped key moved from another blob does not open this one.
	other, err := v.SealCard(testCard, aad)
	if err != nil {
		t.Fatal(err)
	}
	spliced := bytes.Clone(blob)
	copy(spliced[offWrapNon:offDataNon], other[offWrapNon:offDataNon])
	if _, err := v.Open(spliced, aad); !errors.Is(err, ErrDecrypt) {
		t.Errorf("spliced wrapped key: err %v", err)
	}
	// The untouched blob still opens.
	if got, err := v.OpenCard(blob, aad); err != nil || got != testCard {
		t.Fatalf("original: %+v %v", got, err)
	}
}

func TestWrongAADFails(t *testing.T) {
	v := testVault(t)
	blob, err := v.SealCard(testCard, AAD("merchant-1", "card-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, aad := range [][]byte{
		nil,
		AAD("merchant-2", "card-1"),
		AAD("merchant-1", "card-2"),
		AAD("merchant-1card-1"),
		AAD("merchant-", "1card-1"),
	} {
		if _, err := v.OpenCard(blob, aad); !errors.Is(err, ErrDecrypt) {
			t.Errorf("aad %q: err %v, want ErrDecrypt", aad, err)
		}
	}
}

func TestWrongKEKFails(t *testing.T) {
	v1, v2 := testVault(t), testVault(t)
	aad := AAD("m", "c")
	blob, err := v1.SealCard(testCard, aad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.OpenCard(blob, aad); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("wrong KEK: err %v, want ErrUnknownKey", err)
	}
	// Even with the key id forged to match, the wrong KEK cannot unwrap.
	forged := bytes.Clone(blob)
	id := v2.KeyID()
	copy(forged[1:9], id[:])
	if _, err := v2.OpenCard(forged, aad); !errors.Is(err, ErrDecrypt) {
		t.Errorf("forged key id: err %v, want ErrDecrypt", err)
	}
}

func TestAADUnambiguous(t *testing.T) {
	if bytes.Equal(AAD("ab", "c"), AAD("a", "bc")) {
		t.Error("AAD is ambiguous")
	}
	if bytes.Equal(AAD("a"), AAD("a", "")) {
		t.Error("AAD ignores empty parts")
	}
}

func TestConcurrentUse(t *testing.T) {
	v := testVault(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			aad := AAD("m", string(rune('a'+i)))
			for range 50 {
				blob, err := v.SealCard(testCard, aad)
				if err != nil {
					t.Error(err)
					return
				}
				if c, err := v.OpenCard(blob, aad); err != nil || c != testCard {
					t.Errorf("open: %+v %v", c, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestParseKEK(t *testing.T) {
	key := testKEK(t)
	hexKey := hex.EncodeToString(key)
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"raw", key, true},
		{"hex", []byte(hexKey), true},
		{"hex upper newline", []byte(strings.ToUpper(hexKey) + "\n"), true},
		{"hex whitespace", []byte("  " + hexKey + " \r\n"), true},
		{"base64 std", []byte(base64.StdEncoding.EncodeToString(key) + "\n"), true},
		{"base64 raw std", []byte(base64.RawStdEncoding.EncodeToString(key)), true},
		{"base64 url", []byte(base64.URLEncoding.EncodeToString(key) + "\n"), true},
		{"base64 raw url", []byte(base64.RawURLEncoding.EncodeToString(key)), true},
		{"empty", nil, false},
		{"whitespace only", []byte(" \n\t\n"), false},
		{"raw 31", key[:31], false},
		{"raw 33", append(bytes.Clone(key), 7), false},
		{"raw 16", key[:16], false},
		{"hex 62", []byte(hexKey[:62]), false},
		{"hex 66", []byte(hexKey + "ab"), false},
		{"hex 64 with non-hex", []byte(hexKey[:63] + "g"), false},
		{"base64 of 31", []byte(base64.StdEncoding.EncodeToString(key[:31])), false},
		{"base64 of 33", []byte(base64.StdEncoding.EncodeToString(append(bytes.Clone(key), 1))), false},
		{"base64 of 16", []byte(base64.StdEncoding.EncodeToString(key[:16])), false},
		{"garbage", []byte("this is not a key at all, sorry!!\n"), false},
		{"garbage 44", []byte(strings.Repeat("!", 44)), false},
		{"pem-ish", []byte("-----BEGIN KEY-----\n" + hexKey + "\n-----END KEY-----\n"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKEK(tc.data)
			if !tc.ok {
				if err == nil {
					t.Fatalf("want error, got key %x", got)
				}
				if strings.Contains(err.Error(), hexKey[:16]) {
					t.Fatal("error echoes key material")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, key) {
				t.Fatalf("got %x want %x", got, key)
			}
		})
	}
}

func TestLoadKEK(t *testing.T) {
	dir := t.TempDir()
	key := testKEK(t)
	p := filepath.Join(dir, "k")
	if err := os.WriteFile(p, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKEK(p)
	if err != nil || !bytes.Equal(got, key) {
		t.Fatalf("LoadKEK: %x %v", got, err)
	}
	if _, err := LoadKEK(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: want error")
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadKEK(bad)
	if err == nil || !strings.Contains(err.Error(), "64 hex characters") || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file error not clear: %v", err)
	}
	// A key others may read is reported (the node warns), and still read.
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o600, 0o400} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		got, exposed := KeyFileExposed(p)
		if want := mode&0o077 != 0; exposed != want || got != mode {
			t.Errorf("key file with mode %04o: exposed %v (mode %04o), want %v", mode, exposed, got, want)
		}
		if k, err := LoadKEK(p); err != nil || !bytes.Equal(k, key) {
			t.Errorf("key file with mode %04o: %v", mode, err)
		}
	}
}

func TestDevKEK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := DevKEK(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != KeySize {
		t.Fatalf("key length %d", len(k1))
	}
	p := filepath.Join(dir, DevKeyFile)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	content, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(content)) != hex.EncodeToString(k1) {
		t.Errorf("file is not the hex key: %q", content)
	}
	k2, err := DevKEK(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) {
		t.Error("second DevKEK returned another key")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("leftover files: %v", entries)
	}
}

func TestDevKEKConcurrent(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	keys := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := DevKEK(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if !bytes.Equal(keys[0], keys[i]) {
			t.Fatal("concurrent DevKEK calls disagree")
		}
	}
}

func TestDevKEKBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DevKeyFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := DevKEK(dir); err == nil {
		t.Error("corrupt dev key file: want error, not silent replacement")
	}
}

func TestNewToken(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != TokenLen || TokenLen != 47 {
			t.Fatalf("token length %d: %q", len(tok), tok)
		}
		if !strings.HasPrefix(tok, "tok_") {
			t.Fatalf("prefix: %q", tok)
		}
		raw, err := base64.RawURLEncoding.DecodeString(tok[4:])
		if err != nil || len(raw) != 32 {
			t.Fatalf("body not base64url of 32 bytes: %q %v", tok, err)
		}
		if strings.ContainsAny(tok, "+/=") {
			t.Fatalf("not base64url without padding: %q", tok)
		}
		if !ValidTokenFormat(tok) {
			t.Fatalf("ValidTokenFormat(%q) = false", tok)
		}
		if seen[tok] {
			t.Fatalf("duplicate token %q", tok)
		}
		seen[tok] = true
	}
	for _, s := range []string{"", "tok_", "tok_abc", "xyz_" + strings.Repeat("A", 43), "tok_" + strings.Repeat("A", 42) + "=", "tok_" + strings.Repeat("+", 43)} {
		if ValidTokenFormat(s) {
			t.Errorf("ValidTokenFormat(%q) = true", s)
		}
	}
}

// A vault given the previous key opens blobs of both keys, seals under the
// current one only, and Reseal moves a previous-key blob to the current
// key; without the previous key such a blob is ErrUnknownKey.
func TestVaultWithPreviousKey(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	oldV, _ := New(oldKey)
	cur, _ := New(newKey)
	if _, err := cur.WithPrevious(newKey); err == nil {
		t.Fatal("the current key accepted as the previous one")
	}
	both, err := cur.WithPrevious(oldKey)
	if err != nil || !both.HasPrevious() || cur.HasPrevious() {
		t.Fatal(err)
	}
	aad := AAD("m1", "card1")
	old, _ := oldV.Seal([]byte("4111111111111111"), aad)
	if _, err := cur.Open(old, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("without the previous key: %v", err)
	}
	if pt, err := both.Open(old, aad); err != nil || string(pt) != "4111111111111111" {
		t.Fatalf("with the previous key: %q %v", pt, err)
	}
	if both.SealedUnderCurrent(old) {
		t.Fatal("a previous-key blob reported as current")
	}
	re, err := both.Reseal(old, aad)
	if err != nil || !both.SealedUnderCurrent(re) {
		t.Fatalf("reseal: %v", err)
	}
	if pt, err := cur.Open(re, aad); err != nil || string(pt) != "4111111111111111" {
		t.Fatalf("a resealed blob under the current key alone: %q %v", pt, err)
	}
	if _, err := both.Reseal(old, AAD("m2", "card1")); err == nil {
		t.Fatal("reseal with another aad succeeded")
	}
	fresh, _ := both.Seal([]byte("x"), aad)
	if !both.SealedUnderCurrent(fresh) {
		t.Fatal("a vault with a previous key sealed under it")
	}
}
