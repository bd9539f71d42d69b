package order_test

// The binary codec lives in persistence/command; its round-trip, property
// and fuzz tests live here, beside the generators of every kind of order
// and command (fixtures_test.go, apply_property_test.go) they feed it. Only
// this external test package imports the codec: package order itself knows
// nothing of the log. The known-answer fixtures are beside the codec.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/paygate/gateway/order"
	"github.com/paygate/gateway/persistence/command"
)

// fillMode says how fillRandom sets a field.
type fillMode int

const (
	fillAll   fillMode = iota // every field non-zero, recursively
	fillMixed                 // each field non-zero or zero at random
)

// fillRandom sets every exported field of v, recursively, by reflection: a
// field added to Order or Command later is filled too, so a codec that
// forgets it fails the round trip. A field of a kind it does not know fails
// the test: extend the filler and the codec together.
func fillRandom(t testing.TB, rng *rand.Rand, v reflect.Value, mode fillMode, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		b := make([]byte, 1+rng.IntN(24))
		for i := range b {
			if rng.IntN(4) == 0 {
				b[i] = byte(rng.IntN(256)) // any byte, not only text
			} else {
				b[i] = byte('a' + rng.IntN(26))
			}
		}
		v.SetString(string(b))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(randInt(rng) >> (64 - v.Type().Bits()))
		if v.Int() == 0 {
			v.SetInt(-1)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		x := uint64(randInt(rng)) >> (64 - v.Type().Bits())
		v.SetUint(max(x, 1))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillRandom(t, rng, p.Elem(), mode, path)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Fatalf("%s.%s: unexported field; the codec test does not know it", path, f.Name)
			}
			if mode == fillMixed && rng.IntN(2) == 0 {
				continue // left zero
			}
			fillRandom(t, rng, v.Field(i), mode, path+"."+f.Name)
		}
	case reflect.Slice:
		// Never an empty non-nil slice: the codec decodes empty as nil
		// (see codec.go), and Apply never makes one.
		n := 1 + rng.IntN(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fillRandom(t, rng, s.Index(i), mode, fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		t.Fatalf("%s: kind %s is not handled by the codec test", path, v.Kind())
	}
}

// randInt is a random int64 of random magnitude and sign, so varints of
// every length are exercised.
func randInt(rng *rand.Rand) int64 {
	x := int64(rng.Uint64() >> rng.IntN(64))
	if rng.IntN(2) == 0 {
		x = -x
	}
	return x
}

// checkAllSet fails on any zero field: the filler reached every field.
func checkAllSet(t testing.TB, v reflect.Value, path string) {
	t.Helper()
	if v.IsZero() {
		t.Fatalf("%s is zero after fillAll", path)
	}
	switch v.Kind() {
	case reflect.Pointer:
		checkAllSet(t, v.Elem(), path)
	case reflect.Struct:
		for i := range v.NumField() {
			checkAllSet(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkAllSet(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// firstDiff names the first field where want and got differ.
func firstDiff(want, got reflect.Value, path string) string {
	switch want.Kind() {
	case reflect.Pointer:
		if want.IsNil() != got.IsNil() {
			return fmt.Sprintf("%s: nil %v, want nil %v", path, got.IsNil(), want.IsNil())
		}
		if !want.IsNil() {
			return firstDiff(want.Elem(), got.Elem(), path)
		}
	case reflect.Struct:
		for i := range want.NumField() {
			if d := firstDiff(want.Field(i), got.Field(i), path+"."+want.Type().Field(i).Name); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if want.IsNil() != got.IsNil() || want.Len() != got.Len() {
			return fmt.Sprintf("%s: len %d (nil %v), want len %d (nil %v)", path, got.Len(), got.IsNil(), want.Len(), want.IsNil())
		}
		for i := range want.Len() {
			if d := firstDiff(want.Index(i), got.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(want.Interface(), got.Interface()) {
		return fmt.Sprintf("%s: got %#v, want %#v", path, got.Interface(), want.Interface())
	}
	return ""
}

func randomOrder(t testing.TB, rng *rand.Rand, mode fillMode) *order.Order {
	o := &order.Order{}
	fillRandom(t, rng, reflect.ValueOf(o).Elem(), mode, "Order")
	return o
}

func randomCommand(t testing.TB, rng *rand.Rand, mode fillMode) *order.Command {
	c := &order.Command{}
	fillRandom(t, rng, reflect.ValueOf(c).Elem(), mode, "Command")
	return c
}

func randomTokenGrant(t testing.TB, rng *rand.Rand, mode fillMode) *order.TokenGrant {
	g := &order.TokenGrant{}
	fillRandom(t, rng, reflect.ValueOf(g).Elem(), mode, "TokenGrant")
	return g
}

// roundTrip encodes v, decodes it, and requires the same value and, encoded
// again, the same bytes.
func roundTrip[T any](t *testing.T, where string, v *T, enc func([]byte, *T) []byte, dec func([]byte) (*T, error)) {
	t.Helper()
	prefix := []byte("prefix")
	b := enc(append([]byte(nil), prefix...), v)
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("%s: encoding did not append to dst", where)
	}
	b = b[len(prefix):]
	got, err := dec(b)
	if err != nil {
		t.Fatalf("%s: decode: %v", where, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("%s: round trip differs at %s", where, firstDiff(reflect.ValueOf(v).Elem(), reflect.ValueOf(got).Elem(), reflect.TypeFor[T]().Name()))
	}
	if b2 := enc(nil, got); !bytes.Equal(b2, b) {
		t.Fatalf("%s: encoding is not canonical", where)
	}
	// The decoded value does not alias the input (Pebble reuses buffers).
	for i := range b {
		b[i] = 0xff
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("%s: decoded value aliases the input buffer", where)
	}
}

func TestOrderCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x6f72646572))
	roundTrip(t, "zero order", &order.Order{}, command.AppendOrder, command.DecodeOrder)
	for i := range 2000 {
		mode := fillMode(i % 2)
		o := randomOrder(t, rng, mode)
		if mode == fillAll {
			checkAllSet(t, reflect.ValueOf(o).Elem(), "Order")
		}
		roundTrip(t, fmt.Sprintf("order %d", i), o, command.AppendOrder, command.DecodeOrder)
	}
	for _, fx := range fxOrders() {
		roundTrip(t, "fixture "+fx.name, fx.order(), command.AppendOrder, command.DecodeOrder)
	}
}

func TestCommandCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x636d64))
	roundTrip(t, "zero command", &order.Command{}, command.AppendCommand, command.DecodeCommand)
	for i := range 2000 {
		mode := fillMode(i % 2)
		c := randomCommand(t, rng, mode)
		if mode == fillAll {
			checkAllSet(t, reflect.ValueOf(c).Elem(), "Command")
		}
		roundTrip(t, fmt.Sprintf("command %d", i), c, command.AppendCommand, command.DecodeCommand)
	}
}

func TestTokenGrantCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x746f6b))
	roundTrip(t, "zero token grant", &order.TokenGrant{}, command.AppendTokenGrant, command.DecodeTokenGrant)
	for i := range 500 {
		mode := fillMode(i % 2)
		g := randomTokenGrant(t, rng, mode)
		if mode == fillAll {
			checkAllSet(t, reflect.ValueOf(g).Elem(), "TokenGrant")
		}
		roundTrip(t, fmt.Sprintf("token grant %d", i), g, command.AppendTokenGrant, command.DecodeTokenGrant)
	}
}

// Orders and commands as Apply makes them round-trip exactly (nil Txns of
// an init-payment stay nil), and applying the decoded command to the
// decoded order gives the same bytes: what a replica reading Pebble and one
// reading its cache compute.
func TestCodecRoundTripsApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x6170706c79))
	for run := range 200 {
		g := &gen{rng: rng, now: fxEpoch}
		var cur *order.Order
		for step := range 30 {
			where := fmt.Sprintf("run %d step %d", run, step)
			cmd := g.command(cur)
			roundTrip(t, where+" command", cmd, command.AppendCommand, command.DecodeCommand)
			next, _ := order.Apply(cur, cmd)
			if next == nil {
				continue
			}
			roundTrip(t, where+" order", next, command.AppendOrder, command.DecodeOrder)
			if cur != nil {
				dc, _ := command.DecodeOrder(command.AppendOrder(nil, cur))
				dcmd, _ := command.DecodeCommand(command.AppendCommand(nil, cmd))
				again, _ := order.Apply(dc, dcmd)
				if !bytes.Equal(command.AppendOrder(nil, again), command.AppendOrder(nil, next)) {
					t.Fatalf("%s: Apply on decoded values differs", where)
				}
			}
			cur = next
		}
	}
}

// An empty non-nil slice encodes as nil does: replicas that hold the same
// order as [] (decoded from legacy JSON) and nil (made by Apply) must write
// the same bytes.
func TestCodecEmptySliceIsNil(t *testing.T) {
	a, b := &order.Order{ID: "o"}, &order.Order{ID: "o", Txns: []order.Transaction{}}
	if !bytes.Equal(command.AppendOrder(nil, a), command.AppendOrder(nil, b)) {
		t.Fatal("nil and empty Txns encode differently")
	}
	c := &order.Command{Create: &order.CreateData{SealedCard: []byte{}}}
	got, err := command.DecodeCommand(command.AppendCommand(nil, c))
	if err != nil || got.Create.SealedCard != nil {
		t.Fatalf("empty SealedCard: %v %#v", err, got)
	}
}

// Every truncation and many corruptions of valid encodings are errors or
// valid values, never panics.
func TestCodecRejectsGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 0x6761726261))
	check := func(name string, valid []byte, dec func([]byte) error) {
		t.Helper()
		for n := range len(valid) {
			if err := dec(valid[:n]); err == nil {
				t.Fatalf("%s truncated to %d of %d bytes: no error", name, n, len(valid))
			}
		}
		if err := dec(append(append([]byte(nil), valid...), 0)); err == nil {
			t.Fatalf("%s with a trailing byte: no error", name)
		}
		bad := append([]byte(nil), valid...)
		bad[0] = '{'
		if err := dec(bad); err == nil {
			t.Fatalf("%s with an unknown version: no error", name)
		}
		for range 300 {
			bad := append([]byte(nil), valid...)
			for range 1 + rng.IntN(4) {
				bad[rng.IntN(len(bad))] = byte(rng.IntN(256))
			}
			_ = dec(bad) // must not panic
		}
	}
	decO := func(b []byte) error { _, err := command.DecodeOrder(b); return err }
	decC := func(b []byte) error { _, err := command.DecodeCommand(b); return err }
	decT := func(b []byte) error { _, err := command.DecodeTokenGrant(b); return err }
	for i := range 50 {
		check(fmt.Sprintf("order %d", i), command.AppendOrder(nil, randomOrder(t, rng, fillMode(i%2))), decO)
		check(fmt.Sprintf("command %d", i), command.AppendCommand(nil, randomCommand(t, rng, fillMode(i%2))), decC)
		check(fmt.Sprintf("token grant %d", i), command.AppendTokenGrant(nil, randomTokenGrant(t, rng, fillMode(i%2))), decT)
	}
	for _, b := range [][]byte{
		nil, {1}, {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // varint longer than 10 bytes
		{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02},       // varint over 64 bits
	} {
		if decO(b) == nil || decC(b) == nil || decT(b) == nil {
			t.Fatalf("%x: no error", b)
		}
	}
}

func codecSeeds(f *testing.F, enc func(*rand.Rand) []byte) {
	f.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := enc(rng)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte(`{"merchant":"m1"}`))
}

// FuzzDecodeOrder: any input decodes without panicking, and what decodes
// encodes back to a value that decodes the same.
func FuzzDecodeOrder(f *testing.F) {
	codecSeeds(f, func(rng *rand.Rand) []byte { return command.AppendOrder(nil, randomOrder(f, rng, fillMixed)) })
	for _, fx := range fxOrders() {
		f.Add(command.AppendOrder(nil, fx.order()))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := command.DecodeOrder(b)
		if err != nil {
			return
		}
		again, err := command.DecodeOrder(command.AppendOrder(nil, o))
		if err != nil || !reflect.DeepEqual(again, o) {
			t.Fatalf("re-encoding changed the order: %v", err)
		}
	})
}

// FuzzDecodeCommand is FuzzDecodeOrder for commands.
func FuzzDecodeCommand(f *testing.F) {
	codecSeeds(f, func(rng *rand.Rand) []byte { return command.AppendCommand(nil, randomCommand(f, rng, fillMixed)) })
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := command.DecodeCommand(b)
		if err != nil {
			return
		}
		again, err := command.DecodeCommand(command.AppendCommand(nil, c))
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("re-encoding changed the command: %v", err)
		}
	})
}

// benchOrder is a realistic stored order: authorised, with a 3-D Secure
// result, billing address and one transaction.
func benchOrder() *order.Order {
	for _, fx := range fxOrders() {
		if fx.name == "authorized" {
			return fx.order()
		}
	}
	panic("no authorized fixture")
}

// BenchmarkOrderCodec compares the binary codec with the JSON the store
// used before (go-json-experiment/json, deterministic as putJSON wrote it).
func BenchmarkOrderCodec(b *testing.B) {
	o := benchOrder()
	benchCodec(b, o, command.AppendOrder, command.DecodeOrder, json.Deterministic(true))
	b.Run("encode/binary-reused-buffer", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = command.AppendOrder(buf[:0], o)
		}
	})
}

// BenchmarkCommandCodec does the same for a charge's create command.
func BenchmarkCommandCodec(b *testing.B) {
	o := benchOrder()
	c := &order.Command{Kind: order.KindCreate, Time: fxEpoch, Merchant: o.Merchant, OrderID: o.ID,
		TxnID: "txn_0123456789abcdef", RequestHash: "0123456789abcdef0123456789abcdef",
		Create: &order.CreateData{Amount: o.Amount, Currency: o.Currency, Descriptor: o.Descriptor,
			Website: o.Website, ProcessingMID: o.ProcessingMID, CallbackURL: o.CallbackURL,
			SettleDelayHours: o.SettleDelayHours, Source: o.Source, SealedCard: bytes.Repeat([]byte{0xa5}, 96),
			ThreeDS: o.ThreeDS}}
	benchCodec(b, c, command.AppendCommand, command.DecodeCommand)
}

// benchCodec runs encode and decode of v in the binary codec and in JSON.
func benchCodec[T any](b *testing.B, v *T, appendBin func([]byte, *T) []byte, decodeBin func([]byte) (*T, error), opts ...json.Options) {
	bin := appendBin(nil, v)
	js, err := json.Marshal(v, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("encoded size: binary %d bytes, JSON %d bytes", len(bin), len(js))
	b.Run("encode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = appendBin(nil, v)
		}
	})
	b.Run("encode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(v, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeBin(bin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var out T
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
