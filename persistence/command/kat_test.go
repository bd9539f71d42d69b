package command

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/paygate/gateway/order"
)

var updateKnownAnswers = flag.Bool("update-known-answers", false,
	"rewrite testdata/known_answers.txt from the current codec (only for a new format version)")

// packedLater are the Cmd kinds added after entry/packed's fixture was
// written: each has a fixture of its own, and the packed one stays as it was.
var packedLater = map[string]bool{"MerchantKeys": true, "VaultRewrap": true, "Operator": true, "Session": true, "MID": true, "RequestHashKey": true}

// knownAnswerCases are the values whose encodings testdata/known_answers.txt
// holds: every Cmd kind as a log entry, all of them packed in one, and the
// order and token records the commands leave in the store.
func knownAnswerCases() map[string]func() ([]byte, any, func([]byte) (any, error)) {
	samples := entrySamples()
	entry := func(cmds []Cmd) func() ([]byte, any, func([]byte) (any, error)) {
		return func() ([]byte, any, func([]byte) (any, error)) {
			b, err := EncodeEntry(cmds)
			if err != nil {
				panic(err)
			}
			return b, cmds, func(b []byte) (any, error) { return DecodeEntry(b) }
		}
	}
	cases := map[string]func() ([]byte, any, func([]byte) (any, error)){}
	var all []Cmd
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range samples {
			if !yield(k) {
				return
			}
		}
	}) {
		cases["entry/"+name] = entry([]Cmd{samples[name]})
		// packed holds the kinds its first fixture had; a later kind
		// (carried as JSON, like Member) has its own line.
		if name != "Audit" && !packedLater[name] {
			all = append(all, samples[name])
		}
	}
	cases["entry/packed"] = entry(all)
	o := &order.Order{Merchant: "m1", ID: "o1", Amount: 1000, Currency: "USD", Status: order.StatusAuthorized,
		Decline: &order.Decline{Code: "05", Message: "no"}, ThreeDS: &order.ThreeDS{Version: "2.2.0", ECI: "05"},
		Source:      order.PaymentSource{Type: "card", CardID: "card1", Billing: &order.Address{City: "Springfield"}},
		Txns:        []order.Transaction{{ID: "t1", Operation: order.OpAuth, Status: order.TxnSuccess, Amount: 1000}},
		RequestHash: "h1", CreatedAt: 1, UpdatedAt: 2, Version: 2}
	cases["record/order"] = func() ([]byte, any, func([]byte) (any, error)) {
		return AppendOrder(nil, o), o, func(b []byte) (any, error) { return DecodeOrder(b) }
	}
	g := &order.TokenGrant{Merchant: "m1", CardID: "card1", ExpiresAt: 9, Source: o.Source}
	cases["record/token"] = func() ([]byte, any, func([]byte) (any, error)) {
		return AppendTokenGrant(nil, g), g, func(b []byte) (any, error) { return DecodeTokenGrant(b) }
	}
	return cases
}

// The formats are replicated and stored: bytes written by an earlier
// binary must decode to the same values, and the same values must encode
// to the same bytes (replicas compare digests of what they wrote). The
// fixtures were written once; a change of format adds a version, it does
// not rewrite them: the old line is kept as "<case>@v<N>", which must
// still decode to the case's value (its encoding is the new version's).
func TestKnownAnswers(t *testing.T) {
	cases := knownAnswerCases()
	const path = "testdata/known_answers.txt"
	if *updateKnownAnswers {
		var buf bytes.Buffer
		old, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(old), "\n") {
			if name, _, _ := strings.Cut(line, " "); strings.Contains(name, "@v") {
				fmt.Fprintln(&buf, line)
			}
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range cases {
				if !yield(k) {
					return
				}
			}
		}) {
			b, _, _ := cases[name]()
			fmt.Fprintf(&buf, "%s %x\n", name, b)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, hx, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		want, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		base, _, older := strings.Cut(name, "@v")
		build, ok := cases[base]
		if !ok {
			t.Fatalf("fixture %s has no case", name)
		}
		seen[name] = true
		got, value, decode := build()
		if older {
			got = want // an older version's bytes: decoded, no longer written
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encodes as\n%x\nwant\n%x", name, got, want)
		}
		dec, err := decode(want)
		if err != nil {
			t.Errorf("%s: decode: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(dec, value) {
			t.Errorf("%s: decodes as %+v\nwant %+v", name, dec, value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for name := range cases {
		if !seen[name] {
			t.Errorf("case %s has no fixture", name)
		}
	}
}
