package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// DevKeyFile is the name of the development key file inside the data dir.
const DevKeyFile = "dev-vault.key"

// LoadKEK reads a key-encryption key file (--vault-key-file). The file holds
// exactly 32 raw bytes, or 64 hex characters, or the base64 (standard or URL
// alphabet, padded or not) of 32 bytes; surrounding whitespace and a final
// newline are ignored for the text forms. Anything else is an error that
// names the accepted forms but never echoes the file's content.
func LoadKEK(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("vault: read key file: %w", err)
	}
	defer clear(data)
	kek, err := ParseKEK(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return kek, nil
}

// ParseKEK decodes key file content as described for LoadKEK. The result is
// a fresh slice the caller owns.
func ParseKEK(data []byte) ([]byte, error) {
	if len(data) == KeySize {
		return bytes.Clone(data), nil
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return nil, errors.New("vault: key file is empty; want 32 raw bytes, 64 hex characters or base64 of 32 bytes")
	}
	if len(text) == 2*KeySize {
		key := make([]byte, KeySize)
		if _, err := hex.Decode(key, text); err == nil {
			return key, nil
		}
		clear(key)
		return nil, errors.New("vault: key file has 64 characters but they are not hex")
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		if enc.DecodedLen(len(text)) < KeySize || enc.DecodedLen(len(text)) > KeySize+2 {
			continue
		}
		key := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Strict().Decode(key, text)
		if err == nil && n == KeySize {
			return key[:n], nil
		}
		clear(key)
	}
	return nil, fmt.Errorf("vault: key file must hold 32 raw bytes, 64 hex characters or base64 of 32 bytes (found %d bytes that are none of these)", len(data))
}

// DevKEK returns the development key-encryption key (--dev): it reads
// <dataDir>/dev-vault.key, or creates it with 32 random bytes written as hex
// and mode 0600. Creation is atomic: concurrent callers agree on one key and
// never see a partly written file.
func DevKEK(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, DevKeyFile)
	kek, err := LoadKEK(path)
	if err == nil {
		return kek, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("vault: create data dir: %w", err)
	}

	key := make([]byte, KeySize)
	defer clear(key)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("vault: random key: %w", err)
	}
	content := []byte(hex.EncodeToString(key) + "\n")
	defer clear(content)

	tmp, err := os.CreateTemp(dataDir, DevKeyFile+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("vault: create dev key: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("vault: create dev key: %w", err)
	}
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("vault: write dev key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("vault: write dev key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("vault: write dev key: %w", err)
	}
	// Link fails if the file exists: another process won the race, use its key.
	if err := os.Link(tmpName, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("vault: install dev key: %w", err)
	}
	syncDir(dataDir)
	return LoadKEK(path)
}

// syncDir makes a new directory entry durable; failure is not fatal.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// KeyFileExposed reports a key file that its group or others may read or
// write, with its mode: whoever reads it opens every stored card. The node
// warns about one at start rather than refusing it, since key files made by
// the guide before it said umask 077, and secrets mounted by some
// orchestrators, are 0644.
func KeyFileExposed(path string) (os.FileMode, bool) {
	fi, err := os.Stat(path)
	if err != nil || runtime.GOOS == "windows" {
		return 0, false
	}
	return fi.Mode().Perm(), fi.Mode().Perm()&0o077 != 0
}
