package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand"
	"sync"
	"testing"
)

// The ledger's encoder writes what encoding/json's Marshal writes, byte
// for byte, so files written before and after it read the same: typical
// records, empty optional fields, and strings with every character class
// Marshal escapes (quotes, backslash, control characters, HTML, invalid
// UTF-8, U+2028/U+2029) beside plain multi-byte text.
func TestRecordJSONIsMarshals(t *testing.T) {
	records := []Record{
		{},
		{Time: 1764316800123456789, Date: "2026-11-28", Kind: KindAuth, MTI: "0100", MID: "MID000000000001",
			RRN: "000000123456", STAN: "123456", Sent: "1128120000", Amount: 1020, Currency: "978",
			Response: "00", AuthCode: "A1B2C3", ARN: "74000000000000000000001", AVS: "Y", CVV: "M"},
		{Time: -1, Kind: KindCapture, Amount: -5, Response: "12", Original: "capture|MID|RRN|x"},
	}
	pieces := []string{"", "a", "Z9", `"`, `\`, "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "<", ">", "&",
		"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "\xed\xa0\x80", "💳", " ", "/", "'"}
	rng := rand.New(rand.NewSource(35))
	str := func() string {
		var s string
		for n := rng.Intn(5); n > 0; n-- {
			s += pieces[rng.Intn(len(pieces))]
		}
		return s
	}
	for i := 0; i < 2000; i++ {
		records = append(records, Record{Time: rng.Int63() - rng.Int63(), Date: str(), Kind: str(), MTI: str(), MID: str(),
			RRN: str(), STAN: str(), Sent: str(), Amount: rng.Int63() - rng.Int63(), Currency: str(), Response: str(),
			AuthCode: str(), ARN: str(), AVS: str(), CVV: str(), Original: str()})
	}
	for i := range records {
		want, err := json.Marshal(&records[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := records[i].appendJSON(nil); !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	r := Record{Time: 1764316800123456789, Date: "2026-11-28", Kind: KindAuth, MTI: "0100", MID: "MID000000000001",
		RRN: "000000123456", STAN: "123456", Sent: "1128120000", Amount: 1020, Currency: "978",
		Response: "00", AuthCode: "A1B2C3", ARN: "74000000000000000000001", AVS: "Y", CVV: "M"}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = r.appendJSON(buf[:0])
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(&r)
		}
	})
}

// Concurrent appends, authorisations and movements mixed, each answered
// only once written: after Close, a ledger opened on the same directory
// (a restart) reads every one, intact, and an append after Close is
// refused.
func TestLedgerConcurrentAppendsAllReadAfterClose(t *testing.T) {
	dir := t.TempDir()
	l, err := openLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 200
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				kind := KindAuth
				if i%3 == 0 {
					kind = KindCapture
				}
				r := &Record{Time: int64(w*each + i), Date: "2026-11-28", Kind: kind, MID: "MID", Amount: int64(i), Response: "00"}
				if err := l.Append(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	if err := l.Append(&Record{Date: "2026-11-28", Kind: KindAuth}); !errors.Is(err, errLedgerClosed) {
		t.Fatalf("append after Close: %v, want errLedgerClosed", err)
	}
	l2, err := openLedger(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	seen := map[int64]bool{}
	if err := l2.read("2026-11-28", func(r *Record) { seen[r.Time] = true }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != writers*each {
		t.Fatalf("read %d distinct records, want %d", len(seen), writers*each)
	}
}

// A packed record (the repeat index's form) unpacks to the record it was
// made of: every field, empty strings, strings past one varint byte's
// length, and the extremes of Time and Amount.
func TestPackedRecordUnpacksToTheRecord(t *testing.T) {
	rng := rand.New(rand.NewSource(36))
	str := func() string { return string(bytes.Repeat([]byte{byte('a' + rng.Intn(26))}, rng.Intn(300))) }
	records := []Record{
		{},
		{Time: -1 << 63, Amount: 1<<63 - 1},
		{Time: 1764316800123456789, Date: "2026-11-28", Kind: KindAuth, MTI: "0100", MID: "MID000000000001",
			RRN: "000000123456", STAN: "123456", Sent: "1128120000", Amount: 1020, Currency: "978",
			Response: "00", AuthCode: "A1B2C3", ARN: "74000000000000000000001", AVS: "Y", CVV: "M", Original: "auth|MID|RRN"},
	}
	for range 200 {
		r := Record{Time: rng.Int63() - rng.Int63(), Amount: rng.Int63() - rng.Int63()}
		for _, f := range packedFields(&r) {
			*f = str()
		}
		records = append(records, r)
	}
	for _, r := range records {
		if got := pack(&r).record(); *got != r {
			t.Fatalf("packed and unpacked:\n got %+v\nwant %+v", *got, r)
		}
	}
}
