// Command gatewaybench is the gateway's load-testing harness: see
// bench/README.md, or run `gatewaybench help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/paygate/gateway/bench"
)

func main() {
	// Ctrl-C or SIGTERM cancels the run; Main still stops spawned nodes and
	// prints what was measured before it returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
