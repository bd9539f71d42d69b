package persistence

import (
	"errors"
	"testing"

	"github.com/paygate/gateway/persistence/command"
)

// A MID registers once, for an existing merchant; the same registration
// again answers the record, another one for the MID is refused; the index
// the actors read follows commits, a reopen and a snapshot restore.
func TestMIDRegistration(t *testing.T) {
	s := newTestStore(t)
	s.apply(1, &command.Cmd{Merchant: &command.Merchant{ID: "m1"}}, &command.Cmd{Merchant: &command.Merchant{ID: "m2"}})
	reg := func(idx uint64, m command.MID) Result {
		return s.apply(idx, &command.Cmd{MID: &m})[0]
	}
	a := command.MID{MID: "MIDA", MerchantID: "m1", AcquirerAddr: "10.0.0.1:8583", Currencies: []string{"USD"}, RegisteredAt: 10}
	if s.MerchantHasMIDs("m1") {
		t.Fatal("m1 has MIDs before any registration")
	}
	if r := reg(2, a); r.Err != nil || r.MID == nil || r.MID.RegisteredAt != 10 {
		t.Fatalf("register: %+v", r)
	}
	again := a
	again.RegisteredAt = 20
	if r := reg(3, again); r.Err != nil || r.MID.RegisteredAt != 10 {
		t.Fatalf("the same registration again: %+v", r)
	}
	for name, m := range map[string]command.MID{
		"another merchant": {MID: "MIDA", MerchantID: "m2", AcquirerAddr: a.AcquirerAddr, Currencies: a.Currencies},
		"another host":     {MID: "MIDA", MerchantID: "m1", AcquirerAddr: "10.0.0.2:8583", Currencies: a.Currencies},
		"other currencies": {MID: "MIDA", MerchantID: "m1", AcquirerAddr: a.AcquirerAddr, Currencies: []string{"EUR"}},
	} {
		if r := reg(4, m); !errors.Is(r.Err, ErrMIDTaken) {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if r := reg(5, command.MID{MID: "MIDX", MerchantID: "nobody", AcquirerAddr: "h:1", Currencies: []string{"USD"}}); !errors.Is(r.Err, ErrUnknownMerchant) {
		t.Fatalf("unknown merchant: %+v", r)
	}
	reg(6, command.MID{MID: "MIDB", MerchantID: "m2", AcquirerAddr: "10.0.0.2:8583", Currencies: []string{"EUR", "USD"}, RegisteredAt: 11})
	check := func(when string, st *Store) {
		t.Helper()
		if m := st.MID("MIDA"); m == nil || m.AcquirerAddr != a.AcquirerAddr || m.MerchantID != "m1" {
			t.Fatalf("%s: MIDA is %+v", when, m)
		}
		if st.MID("MIDX") != nil || !st.MerchantHasMIDs("m1") || !st.MerchantHasMIDs("m2") || st.MerchantHasMIDs("m3") {
			t.Fatalf("%s: index wrong", when)
		}
		if all, m1 := st.MIDs(""), st.MIDs("m1"); len(all) != 2 || all[0].MID != "MIDA" || all[1].MID != "MIDB" ||
			len(m1) != 1 || m1[0].MID != "MIDA" {
			t.Fatalf("%s: listed %+v and %+v", when, all, m1)
		}
	}
	check("after the commits", s.Store)
	s.reopen()
	check("after a reopen", s.Store)
	other := newTestStore(t)
	restoreFrom(t, other.Store, s.Store)
	check("after a snapshot restore", other.Store)
}
