package persistence

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygate/gateway/order"
)

// BenchmarkSearchOrders measures one page (limit 100) of a search on a store
// of N orders (10 merchants, 20 000 customers, 1 000 card endings): a random
// one of the merchant's list, by e-mail, by last 4, by status, and two
// conditions together. ns/op is the mean; p50-ns and p99-ns percentiles. The
// sizes are $SEARCH_BENCH_ORDERS (comma-separated; default 10000):
//
//	SEARCH_BENCH_ORDERS=10000,1000000 go test -run '^$' -bench SearchOrders -benchtime 20000x ./persistence/
func BenchmarkSearchOrders(b *testing.B) {
	sizes := os.Getenv("SEARCH_BENCH_ORDERS")
	if sizes == "" {
		sizes = "10000"
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("orders=%d", n), func(b *testing.B) { benchmarkSearch(b, n) })
	}
}

func benchmarkSearch(b *testing.B, n int) {
	l := newChargeLoad(b, false)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 1000 {
		batch := l.s.NewBatch()
		for j := i; j < min(i+1000, n); j++ {
			create, outcome := chargeCmds("o-"+strconv.Itoa(j), int64(j+1)*1e6)
			m := "m" + strconv.Itoa(j%10)
			create.Order.Merchant, outcome.Order.Merchant = m, m
			create.Order.Create.CustomerEmail = fmt.Sprintf("c%d@example.com", rng.IntN(20_000))
			create.Order.Create.Source.Masked = fmt.Sprintf("411111******%04d", rng.IntN(1000))
			batch.Apply(create)
			if j%3 != 0 {
				batch.Apply(outcome)
			}
		}
		l.idx++
		if err := batch.Commit(l.idx); err != nil {
			b.Fatal(err)
		}
		batch.Close()
	}
	queries := []func() SearchFilter{
		func() SearchFilter { return SearchFilter{Merchant: "m" + strconv.Itoa(rng.IntN(10))} },
		func() SearchFilter { return SearchFilter{Email: fmt.Sprintf("c%d@example.com", rng.IntN(20_000))} },
		func() SearchFilter { return SearchFilter{Last4: fmt.Sprintf("%04d", rng.IntN(1000))} },
		func() SearchFilter {
			return SearchFilter{Merchant: "m" + strconv.Itoa(rng.IntN(10)), Status: order.StatusProcessing}
		},
		func() SearchFilter {
			return SearchFilter{Merchant: "m" + strconv.Itoa(rng.IntN(10)), Last4: fmt.Sprintf("%04d", rng.IntN(1000))}
		},
	}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f := queries[i%len(queries)]()
		f.Limit = 100
		start := time.Now()
		if _, err := l.s.SearchOrders(f); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2]), "p50-ns")
	b.ReportMetric(float64(took[len(took)*99/100]), "p99-ns")
}
