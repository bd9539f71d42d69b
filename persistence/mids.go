package persistence

// Processing MIDs (contract 12): command.MID applied, and the in-memory
// index the order actors read on every new order and every acquirer call.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/paygate/gateway/persistence/command"
)

// prefixMID holds the registered MIDs: u/<mid> → command.MID JSON.
const prefixMID = "u/"

// Errors of a MID registration, the same on every replica.
var (
	// ErrMIDTaken: the MID is registered already, with other settings
	// (another merchant, host or currencies). A MID is never changed: the
	// orders authorised under it must find the same host for their later
	// movements.
	ErrMIDTaken = errors.New("mid is already registered with other settings")
)

func midKey(mid string) []byte { return append([]byte(prefixMID), mid...) }

// applyMID registers a MID. The same registration again (whatever its
// time) changes nothing and answers the record as it stands, so an
// operator's repeat is harmless.
func (b *Batch) applyMID(m *command.MID) Result {
	if m.MID == "" || m.MerchantID == "" || m.AcquirerAddr == "" || len(m.Currencies) == 0 {
		return Result{Err: fmt.Errorf("mid record without mid, merchant_id, acquirer_addr or currencies")}
	}
	mer, err := getJSON[command.Merchant](b, append([]byte(prefixMerchant), m.MerchantID...))
	if err != nil {
		panic(fmt.Sprintf("persistence: read merchant %s: %v", m.MerchantID, err))
	}
	if mer == nil {
		return Result{Err: ErrUnknownMerchant}
	}
	cur, err := getJSON[command.MID](b, midKey(m.MID))
	if err != nil {
		panic(fmt.Sprintf("persistence: read mid %s: %v", m.MID, err))
	}
	if cur != nil {
		if cur.MerchantID != m.MerchantID || cur.AcquirerAddr != m.AcquirerAddr || !slices.Equal(cur.Currencies, m.Currencies) {
			return Result{Err: ErrMIDTaken}
		}
		return Result{MID: cur}
	}
	b.putJSON(midKey(m.MID), m)
	b.mids = append(b.mids, m)
	return Result{MID: m}
}

// MIDs lists the registered MIDs, by MID; merchant, when not empty, keeps
// that merchant's only.
func (s *Store) MIDs(merchant string) []command.MID {
	idx := s.mids.Load()
	out := make([]command.MID, 0, len(idx.byMID))
	for _, m := range idx.byMID {
		if merchant == "" || m.MerchantID == merchant {
			out = append(out, *m)
		}
	}
	slices.SortFunc(out, func(a, b command.MID) int {
		switch {
		case a.MID < b.MID:
			return -1
		case a.MID > b.MID:
			return 1
		}
		return 0
	})
	return out
}

// MID is the registered MID mid, or nil. The record is shared: read it,
// never change it.
func (s *Store) MID(mid string) *command.MID { return s.mids.Load().byMID[mid] }

// MerchantHasMIDs reports whether any MID is registered for merchant: from
// then on its orders must name one (contract 12).
func (s *Store) MerchantHasMIDs(merchant string) bool { return s.mids.Load().merchants[merchant] }

// midIndex is the registered MIDs in memory, replaced whole when a batch
// registers one (rare: an operator's call), so readers never lock.
type midIndex struct {
	byMID     map[string]*command.MID
	merchants map[string]bool
}

func (x *midIndex) with(added []*command.MID) *midIndex {
	next := &midIndex{byMID: make(map[string]*command.MID, len(x.byMID)+len(added)),
		merchants: make(map[string]bool, len(x.merchants)+len(added))}
	for k, v := range x.byMID {
		next.byMID[k] = v
	}
	for k := range x.merchants {
		next.merchants[k] = true
	}
	for _, m := range added {
		next.byMID[m.MID] = m
		next.merchants[m.MerchantID] = true
	}
	return next
}

// loadMIDs reads every registered MID into the index (at open, and after a
// snapshot replaced the state).
func (s *Store) loadMIDs() error {
	all, err := scanJSON[command.MID](s, prefixMID)
	if err != nil {
		return fmt.Errorf("load mids: %w", err)
	}
	added := make([]*command.MID, len(all))
	for i := range all {
		added[i] = &all[i]
	}
	s.mids.Store((&midIndex{}).with(added))
	return nil
}

// midsCommitted adds a committed batch's registrations to the index.
func (s *Store) midsCommitted(added []*command.MID) {
	if len(added) > 0 {
		s.mids.Store(s.mids.Load().with(added))
	}
}
