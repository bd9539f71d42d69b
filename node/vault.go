package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
)

// Vault key rotation (contract section 14, docs/security.md): a node given
// --vault-previous-key-file opens what that key sealed and seals under
// --vault-key-file; its leader re-seals the older records through the log.

// rewrapBatch bounds the records one re-wrap command carries, and
// rewrapPause is the rest between two: the re-wrap shares the log with
// charges, and a batch of 128 re-seals is ~40 KB of log and a few ms of
// the leader's CPU, so charges never wait behind it for long.
const (
	rewrapBatch = 128
	rewrapPause = 20 * time.Millisecond
	// rewrapRetry is the wait before another pass when one left records
	// behind (a record that changed while it was re-sealed, a failed
	// proposal).
	rewrapRetry = 2 * time.Second
	// vaultCountEvery is how often a node with a previous key recounts.
	vaultCountEvery = 5 * time.Second
)

// underPrevious counts records not sealed under the current key, as of
// the last count (gateway_vault_records_under_previous_key).
var underPrevious atomic.Int64

func init() {
	metrics.NewGauge(`gateway_vault_records_under_previous_key`, func() float64 { return float64(underPrevious.Load()) })
}

// loadVault makes the node's vault: the current key, and the previous one
// when given. oldest is the older of the two keys (the request-hash key of
// a data dir written before it was replicated derives from it: hashkey.go).
func loadVault(cfg Config, kek []byte, logger *slog.Logger) (v *vault.Vault, oldest []byte, err error) {
	v, err = vault.New(kek)
	if err != nil || cfg.VaultPreviousKeyFile == "" {
		return v, kek, err
	}
	if mode, exposed := vault.KeyFileExposed(cfg.VaultPreviousKeyFile); exposed {
		logger.Warn("the previous vault key file is open to its group or others: chmod 600 it",
			"file", cfg.VaultPreviousKeyFile, "mode", fmt.Sprintf("%04o", mode))
	}
	prev, err := vault.LoadKEK(cfg.VaultPreviousKeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--vault-previous-key-file: %w", err)
	}
	if v, err = v.WithPrevious(prev); err != nil {
		return nil, nil, fmt.Errorf("--vault-previous-key-file: %w", err)
	}
	return v, prev, nil
}

// notCurrent reports a sealed value the current key did not seal.
func (n *Node) notCurrent(blob []byte) bool { return !n.vault.SealedUnderCurrent(blob) }

// CountUnderPrevious counts the records not sealed under the current key
// now, and keeps the count for the metric.
func (n *Node) CountUnderPrevious() (int, error) {
	c, err := n.store.CountSealed(n.notCurrent)
	if err == nil {
		underPrevious.Store(int64(c))
	}
	return c, err
}

// countVault keeps the metric current while a rotation runs; without a
// previous key it counts once (a record under an unknown key would show).
func (n *Node) countVault() {
	defer n.bg.Done()
	for {
		if _, err := n.CountUnderPrevious(); err != nil {
			n.logger.Warn("count vault records", "error", err)
		}
		if !n.vault.HasPrevious() {
			return
		}
		select {
		case <-n.stopLeader:
			return
		case <-time.After(vaultCountEvery):
		}
	}
}

// rewrapVault runs on the leader while it leads: passes over the merchants
// and the cards until none is left under the previous key.
func (n *Node) rewrapVault(ctx context.Context) {
	for {
		left, err := n.rewrapPass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			n.logger.Warn("vault re-wrap pass", "error", err)
		}
		if err == nil && left == 0 {
			if c, err := n.CountUnderPrevious(); err == nil && c == 0 {
				n.logger.Info("vault re-wrap done: every record is sealed under the current key; the previous key file may be removed")
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rewrapRetry):
		}
	}
}

// rewrapPass re-seals what one walk finds, a batch per command, and
// returns how many records it could not re-seal.
func (n *Node) rewrapPass(ctx context.Context) (left int, err error) {
	recs, raws, err := n.store.MerchantValues()
	if err != nil {
		return 0, err
	}
	var batch []command.RewrapEntry
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := n.raft.Propose(ctx, &command.Cmd{VaultRewrap: &command.VaultRewrap{Entries: batch}})
		if err == nil {
			left += len(batch) - res.Rewrapped
		}
		batch = nil
		select {
		case <-ctx.Done():
		case <-time.After(rewrapPause):
		}
		return err
	}
	for i := range recs {
		e, ok, err := n.resealMerchant(&recs[i], raws[i])
		if err != nil {
			n.logger.Error("vault re-wrap: merchant record", "merchant_id", recs[i].ID, "error", err)
			left++
			continue
		}
		if ok {
			batch = append(batch, e)
		}
		if len(batch) == rewrapBatch {
			if err := flush(); err != nil {
				return left, err
			}
		}
	}
	if e, ok, err := n.resealClusterCA(); err != nil {
		n.logger.Error("vault re-wrap: the cluster CA's key", "error", err)
		left++
	} else if ok {
		batch = append(batch, e)
	}
	if e, ok, err := n.resealHashKey(); err != nil { // hashkey.go
		n.logger.Error("vault re-wrap: the request-hash key", "error", err)
		left++
	} else if ok {
		batch = append(batch, e)
	}
	if err := flush(); err != nil {
		return left, err
	}
	var cursor []byte
	for {
		cards, next, err := n.store.CardsToRewrap(cursor, rewrapBatch, n.notCurrent)
		if err != nil {
			return left, err
		}
		for _, c := range cards {
			blob, err := n.vault.Reseal(c.Blob, vault.AAD(c.Merchant, c.CardID))
			if err != nil {
				// Never the card's content: only its id and why.
				n.logger.Error("vault re-wrap: card", "card_id", c.CardID, "error", err)
				left++
				continue
			}
			batch = append(batch, persistence.NewRewrapEntry(persistence.CardKey(c.CardID), c.Blob, blob))
		}
		if err := flush(); err != nil {
			return left, err
		}
		if next == nil {
			return left, nil
		}
		cursor = next
	}
}

// resealMerchant re-seals a merchant record's secrets that the current key
// did not seal; ok is false when there is nothing to do.
func (n *Node) resealMerchant(m *command.Merchant, raw []byte) (command.RewrapEntry, bool, error) {
	changed := false
	for _, f := range []struct {
		sealed  *[]byte
		purpose string
	}{
		{&m.APISecretSealed, "merchant-api"}, {&m.PreviousAPISecretSealed, "merchant-api"},
		{&m.WebhookSecretSealed, "merchant-webhook"},
	} {
		if len(*f.sealed) == 0 || !n.notCurrent(*f.sealed) {
			continue
		}
		b, err := n.vault.Reseal(*f.sealed, vault.AAD(f.purpose, m.ID))
		if err != nil {
			return command.RewrapEntry{}, false, err
		}
		*f.sealed, changed = b, true
	}
	if !changed {
		return command.RewrapEntry{}, false, nil
	}
	val, err := persistence.EncodeMerchant(m)
	if err != nil {
		return command.RewrapEntry{}, false, err
	}
	return persistence.NewRewrapEntry(persistence.MerchantKey(m.ID), raw, val), true, nil
}

// resealClusterCA re-seals the replicated cluster CA's key when the current
// key did not seal it; ok is false when there is nothing to do.
func (n *Node) resealClusterCA() (command.RewrapEntry, bool, error) {
	ca, err := n.store.ClusterCA()
	if err != nil || ca == nil || len(ca.SealedKey) == 0 || !n.notCurrent(ca.SealedKey) {
		return command.RewrapEntry{}, false, err
	}
	old, err := persistence.EncodeClusterCA(ca)
	if err != nil {
		return command.RewrapEntry{}, false, err
	}
	if ca.SealedKey, err = n.vault.Reseal(ca.SealedKey, caKeyAAD); err != nil {
		return command.RewrapEntry{}, false, err
	}
	val, err := persistence.EncodeClusterCA(ca)
	if err != nil {
		return command.RewrapEntry{}, false, err
	}
	return persistence.NewRewrapEntry(persistence.ClusterCAKey(), old, val), true, nil
}
