package order

import (
	"flag"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

var viewSeed = flag.Uint64("view-seed", 0, "seed for TestAppendJSONMatchesMarshal (0: time-based)")

// AppendJSON must produce exactly json.Marshal's bytes for every view.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	seed := *viewSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test ./order -run TestAppendJSONMatchesMarshal -view-seed %d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	strs := []string{"", "a", "order-1", "Ünïcödé ✓", "quote\"back\\slash", "ctl\x00\x01\x1f\x7f", "tab\tnl\ncr\rff\fbs\b",
		"<html>&amp;", "\u2028\u2029", "emoji 😀", "4111 11** ****"}
	s := func() string { return strs[rng.IntN(len(strs))] }
	for i := 0; i < 3000; i++ {
		v := &View{}
		fillView(t, rng, reflect.ValueOf(v).Elem(), s, "View")
		want, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			t.Fatal(err)
		}
		if got := v.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("view %d differs:\n got  %s\n want %s", i, got, want)
		}
	}
}

// fillView sets every exported field under v by its kind, so a field added
// to View or to a struct it holds is exercised with no change here: a
// pointer, map or slice is nil a third of the time, a string is one of
// the hard ones, a number any value. A kind it does not know, or an
// unexported field, fails the test rather than going untested.
func fillView(t *testing.T, rng *rand.Rand, v reflect.Value, str func() string, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(str())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(rng.Int64() - rng.Int64())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(rng.Uint64())
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fillView(t, rng, p.Elem(), str, path)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Fatalf("%s.%s is unexported: the view test cannot fill it", path, f.Name)
			}
			fillView(t, rng, v.Field(i), str, path+"."+f.Name)
		}
	case reflect.Map:
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		for j := range n {
			k := reflect.New(v.Type().Key()).Elem()
			fillView(t, rng, k, func() string { return str() + string(rune('a'+j)) }, path+"[key]")
			e := reflect.New(v.Type().Elem()).Elem()
			fillView(t, rng, e, str, path+"[]")
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Slice:
		n := rng.IntN(4)
		if n == 0 {
			v.SetZero()
			return
		}
		sl := reflect.MakeSlice(v.Type(), n, n)
		for j := range n {
			fillView(t, rng, sl.Index(j), str, path+"[]")
		}
		v.Set(sl)
	default:
		t.Fatalf("%s: kind %s is not filled by the view test; teach fillView", path, v.Kind())
	}
}

func BenchmarkViewMarshal(b *testing.B) {
	v := benchView()
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 2048)
		for b.Loop() {
			buf = v.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(v, json.Deterministic(true)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNewView renders an order as an operation's answer shows it (one
// transaction) and as a status read or a notification does (all of them).
func BenchmarkNewView(b *testing.B) {
	o := benchViewOrder()
	b.Run("WithTxn", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewView(o, WithTxn, o.Txns[1].ID)
		}
	})
	b.Run("WithAllTxns", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			NewView(o, WithAllTxns, "")
		}
	})
}

func benchView() *View { return NewView(benchViewOrder(), WithAllTxns, "") }

func benchViewOrder() *Order {
	avs, cvv := "Y", "M"
	o := &Order{ID: "order-123456", Amount: 1020, Currency: "USD", Status: StatusSettled, SettledAmount: 1020,
		Descriptor: "SHOP*ORDER", ProcessingMID: "mid-1", AVSCheck: avs, CVVCheck: cvv, RiskDecision: "accept",
		Source: PaymentSource{Type: "card", CardID: "01a2-card", PaymentToken: "tok_abc", TokenExpiresAt: 1e18,
			Issuer: "Sandbox Bank", BIN: "411111", Brand: "visa", CardType: "Credit", ExpMonth: "12", ExpYear: "2035",
			HolderName: "Jane Doe", Masked: "411111******1111", IssuerCountry: "US"}}
	for i, op := range []Operation{OpAuth, OpSettle, OpRefund} {
		o.Txns = append(o.Txns, Transaction{ID: "txn-" + string(rune('a'+i)), CreatedAt: 1e18, UpdatedAt: 1e18,
			Operation: op, Status: TxnSuccess, Currency: "USD", Amount: 1020, AuthCode: "A1B2C3", ARN: "123456"})
	}
	return o
}
