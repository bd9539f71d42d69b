package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/signature"
)

// DefaultRateLimitRPS applies to merchants created without rate_limit_rps.
const DefaultRateLimitRPS = 100

// MaxRateLimitRPS bounds rate_limit_rps: far above what a node serves, and
// low enough that the burst (twice the rate) cannot overflow.
const MaxRateLimitRPS = 1_000_000_000

// Merchant is a merchant as the front end needs it: secrets opened, and
// its rate limiters.
type Merchant struct {
	ID               string
	Name             string
	APIPublicKey     string
	APISecret        string
	WebhookPublicKey string
	WebhookSecret    string
	RateLimitRPS     int
	limiter          *rate.Limiter // the merchant's signed API calls
	// pageLimiter is for the customers' posts on the hosted form and the
	// issuer page, at the same rate. Anyone holding a form's address can
	// post there; with one shared bucket they could use up the merchant's
	// own API calls.
	pageLimiter *rate.Limiter
	apiKey      *signature.Key // verifies request signatures
	webhookKey  *signature.Key // signs notifications
	// apiKeyUntil is set on the entry of an API pair a rotation replaced:
	// requests signed with it are accepted before that instant only.
	apiKeyUntil time.Time
	// replacedKey is the public key of the API pair a rotation replaced.
	replacedKey string
}

// apiKeyValid reports whether this entry's API pair still signs requests
// at now: the current pair always, a replaced one until its overlap ends.
func (m *Merchant) apiKeyValid(now time.Time) bool {
	return m.apiKeyUntil.IsZero() || now.Before(m.apiKeyUntil)
}

// WebhookKey is the merchant's webhook key pair, prepared for signing
// notifications.
func (m *Merchant) WebhookKey() *signature.Key { return m.webhookKey }

// Merchants is the in-memory merchant directory, keyed by API public key.
// It is filled from the store at start and kept current from the FSM.
type Merchants struct {
	vault *vault.Vault
	mu    sync.RWMutex
	byKey map[string]*Merchant
	byID  map[string]*Merchant
}

// NewMerchants makes an empty directory.
func NewMerchants(v *vault.Vault) *Merchants {
	return &Merchants{vault: v, byKey: map[string]*Merchant{}, byID: map[string]*Merchant{}}
}

// Put adds or replaces a merchant from its stored record.
func (m *Merchants) Put(rec *command.Merchant) error {
	api, err := m.vault.Open(rec.APISecretSealed, vault.AAD("merchant-api", rec.ID))
	if err != nil {
		return fmt.Errorf("open api secret of %s: %w", rec.ID, err)
	}
	hook, err := m.vault.Open(rec.WebhookSecretSealed, vault.AAD("merchant-webhook", rec.ID))
	if err != nil {
		return fmt.Errorf("open webhook secret of %s: %w", rec.ID, err)
	}
	rps := rec.RateLimitRPS
	if rps <= 0 {
		rps = DefaultRateLimitRPS
	}
	rps = min(rps, MaxRateLimitRPS) // a record from before the bound
	var prev *signature.Key
	if rec.PreviousAPIPublicKey != "" {
		sec, err := m.vault.Open(rec.PreviousAPISecretSealed, vault.AAD("merchant-api", rec.ID))
		if err != nil {
			return fmt.Errorf("open previous api secret of %s: %w", rec.ID, err)
		}
		prev = signature.NewKey(rec.PreviousAPIPublicKey, string(sec))
	}
	mer := &Merchant{
		ID: rec.ID, Name: rec.Name, APIPublicKey: rec.APIPublicKey, APISecret: string(api),
		WebhookPublicKey: rec.WebhookPublicKey, WebhookSecret: string(hook), RateLimitRPS: rps,
		limiter:     rate.NewLimiter(rate.Limit(rps), 2*rps),
		pageLimiter: rate.NewLimiter(rate.Limit(rps), 2*rps),
		apiKey:      signature.NewKey(rec.APIPublicKey, string(api)),
		webhookKey:  signature.NewKey(rec.WebhookPublicKey, string(hook)),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.byID[mer.ID]; old != nil {
		// A key rotation keeps the merchant's rate limits where they stand.
		if old.RateLimitRPS == mer.RateLimitRPS {
			mer.limiter, mer.pageLimiter = old.limiter, old.pageLimiter
		}
		delete(m.byKey, old.APIPublicKey)
		delete(m.byKey, old.replacedKey)
	}
	m.byKey[mer.APIPublicKey] = mer
	m.byID[mer.ID] = mer
	if prev != nil {
		mer.replacedKey = rec.PreviousAPIPublicKey
		replaced := *mer
		replaced.apiKey = prev
		replaced.apiKeyUntil = time.Unix(0, rec.PreviousAPIUntil)
		m.byKey[rec.PreviousAPIPublicKey] = &replaced
	}
	return nil
}

// ByPublicKey finds a merchant by API public key.
func (m *Merchants) ByPublicKey(pk string) *Merchant {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byKey[pk]
}

// ByID finds a merchant by id.
func (m *Merchants) ByID(id string) *Merchant {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byID[id]
}

// Credentials are a new merchant's keys, shown once at creation.
type Credentials struct {
	MerchantID string  `json:"merchant_id"`
	API        KeyPair `json:"api"`
	Webhook    KeyPair `json:"webhook"`
}

// KeyPair is a public and secret key.
type KeyPair struct {
	PublicKey string `json:"public_key"`
	SecretKey string `json:"secret_key"`
}

func randomHex(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return prefix + hex.EncodeToString(b)
}

// NewMerchantRecord makes keys from crypto/rand and the record to propose;
// the secrets in the record are sealed by the vault.
func NewMerchantRecord(v *vault.Vault, id, name string, rps int, now time.Time) (*command.Merchant, Credentials, error) {
	if id == "" {
		id = randomHex("mer_", 8)
	}
	creds := Credentials{
		MerchantID: id,
		API:        KeyPair{PublicKey: randomHex("pk_", 12), SecretKey: randomHex("sk_", 24)},
		Webhook:    KeyPair{PublicKey: randomHex("whpk_", 12), SecretKey: randomHex("whsk_", 24)},
	}
	apiSealed, err := v.Seal([]byte(creds.API.SecretKey), vault.AAD("merchant-api", id))
	if err != nil {
		return nil, creds, err
	}
	hookSealed, err := v.Seal([]byte(creds.Webhook.SecretKey), vault.AAD("merchant-webhook", id))
	if err != nil {
		return nil, creds, err
	}
	return &command.Merchant{
		ID: id, Name: name, APIPublicKey: creds.API.PublicKey, APISecretSealed: apiSealed,
		WebhookPublicKey: creds.Webhook.PublicKey, WebhookSecretSealed: hookSealed,
		RateLimitRPS: rps, CreatedAt: now.UnixNano(),
	}, creds, nil
}
