// Package wallettest holds the helpers the wallet packages' tests share:
// reading their committed fixtures and decoding literal test vectors. It is
// imported by tests only.
package wallettest

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// KATNow is the clock of the committed fixtures: gen_testdata.go (in
// transport/wallet) signs them at it and the tests decrypt them at it.
var KATNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// KATClock is a clock stopped at d after KATNow, for a config's Now.
func KATClock(d time.Duration) func() time.Time {
	return func() time.Time { return KATNow.Add(d) }
}

// ReadFile reads a file of the calling package's testdata folder.
func ReadFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// MustHex decodes a hex test vector.
func MustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// MustB64 decodes a standard base64 test vector.
func MustB64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ReadJSON reads a JSON file of the calling package's testdata folder (a
// token fixture) into a T.
func ReadJSON[T any](t testing.TB, name string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ReadFile(t, name), &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
