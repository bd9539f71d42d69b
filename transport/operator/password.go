package operator

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are kept only as argon2id hashes in the PHC string format
// ("$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>", unpadded standard
// base64), so the parameters travel with each hash and can be raised later
// without breaking the hashes already stored.
//
// The parameters are OWASP's first argon2id configuration (19 MiB, two
// passes, one lane): ~50 ms on one core here. A hash is memory-hard, so
// the number of hashes computed at once is bounded (hashSlots): a burst of
// sign-ins cannot take more than hashSlots×19 MiB.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltBytes = 16
	argonKeyBytes  = 32
	hashSlots      = 4
)

// PasswordRunesMin and PasswordBytesMax are the password policy: at least
// 12 characters (length beats composition rules, NIST SP 800-63B), at most
// 1024 bytes (a bound on what a sign-in hashes).
const (
	PasswordRunesMin = 12
	PasswordBytesMax = 1024
)

// slots bounds concurrent argon2id computations (see hashSlots).
var slots = make(chan struct{}, hashSlots)

// CheckPassword says what is wrong with a new password for email, or "".
// The message never quotes the password.
func CheckPassword(email, password string) string {
	switch {
	case !utf8.ValidString(password):
		return "password should be valid UTF-8"
	case utf8.RuneCountInString(password) < PasswordRunesMin:
		return fmt.Sprintf("password should have at least %d characters", PasswordRunesMin)
	case len(password) > PasswordBytesMax:
		return fmt.Sprintf("password should have at most %d bytes", PasswordBytesMax)
	case strings.EqualFold(password, email):
		return "password should not be the email"
	}
	return ""
}

// HashPassword hashes password with a fresh random salt.
func HashPassword(password string) (string, error) {
	salt := make([]byte, argonSaltBytes)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := idKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyBytes)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// ErrBadHash is a stored hash that is not an argon2id PHC string this
// package can check.
var ErrBadHash = errors.New("operator: not an argon2id hash")

// Bounds on the parameters a stored hash may ask for, so that a corrupt or
// crafted record cannot make one check take gigabytes.
const (
	hashMemoryKiBMax = 1 << 20
	hashTimeMax      = 16
	hashKeyBytesMax  = 128
)

// VerifyPassword reports whether password matches the PHC string phc, in
// time that does not depend on where they differ.
func VerifyPassword(phc, password string) (bool, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return false, ErrBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrBadHash
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil ||
		m == 0 || m > hashMemoryKiBMax || t == 0 || t > hashTimeMax || p == 0 {
		return false, ErrBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false, ErrBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > hashKeyBytesMax {
		return false, ErrBadHash
	}
	got := idKey([]byte(password), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// idKey is argon2.IDKey inside one of the slots.
func idKey(password, salt []byte, t, m uint32, p uint8, n uint32) []byte {
	slots <- struct{}{}
	defer func() { <-slots }()
	return argon2.IDKey(password, salt, t, m, p, n)
}

// decoyHash is checked when a sign-in names no operator, so that an
// unknown email costs the same time as a wrong password (no enumeration of
// operators by timing).
var decoyHash = sync.OnceValue(func() string {
	h, err := HashPassword("decoy password that no operator has")
	if err != nil {
		panic(err)
	}
	return h
})

// VerifyDecoy spends the time of one verification and always fails.
func VerifyDecoy(password string) {
	_, _ = VerifyPassword(decoyHash(), password)
}
