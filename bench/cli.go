package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/paygate/gateway/bench/launch"
)

// Exit codes of Main.
const (
	ExitOK          = 0
	ExitNotStarted  = 1 // the run could not start, or compare, stalls or layers could not read its files
	ExitUsage       = 2
	ExitInterrupted = 130 // the run was cut short; its partial report was still written
)

// Usage is the CLI's help text.
const Usage = `usage:
  gatewaybench run (--target URL[,URL...] | --spawn 1|3) [flags]
  gatewaybench compare A.json B.json
  gatewaybench stalls [--slice 10ms] [--top 15] [--syscall-over 5ms] TRACE
  gatewaybench layers CPU_PROFILE...

run drives one workload against gateway nodes on loopback addresses and prints
a latency and throughput table; --json also writes the result as JSON.

target:
  --target URL           node base address, e.g. http://127.0.0.1:8080; a comma-separated
                         list spreads the workers over several nodes
  --spawn N              instead of --target: start 1 node or a 3-node cluster from gatewayd
                         in a temporary directory, create a merchant, remove it all afterwards
  --gatewayd PATH        gatewayd binary for --spawn (default: go build ./cmd/gatewayd)
  --settle-delay-unit D  --settle-delay-unit given to spawned nodes (default 1h)
  --gatewayd-flag F      --spawn: one more argument for every node, repeatable; {node} in it
                         becomes the node's id, e.g. --gatewayd-flag=--raft-log-dir=/mnt/wal/{node}
  --ready-timeout D      --spawn: bound on each wait for the nodes (default 60s)
  --leader-only          --spawn 3: send every request to the leader instead of spreading the
                         workers over all nodes (followers forward to the leader: one more hop)
  --node-pids PID[,PID]  --target: the nodes' process ids, to report their CPU per request
                         (Linux; --spawn reports its nodes' own)
  --node-pprof A[,A]     --target: the nodes' pprof addresses (gatewayd --pprof-addr), for
                         --profile-dir (--spawn serves its nodes' own)
  --merchant-key K       merchant API public key (not needed with --spawn or for ceiling)
  --merchant-secret S    merchant API secret key
  --webhook-key K        webhook public key: verify notifications (optional)
  --webhook-secret S     webhook secret key

load:
  --workload W           charge | lifecycle | status | mixed | ceiling | webhooks | search (default charge)
  --concurrency N        workers (closed loop) or bound on iterations in flight (open loop) (default 16)
  --duration D           measured window (default 10s)
  --warmup D             unrecorded load before the window (default 0s)
  --rate R               open loop: R arrivals per second, latency from the intended send time
                         (default 0: closed loop)
  --queue N              open loop: arrivals that may wait for a worker before new ones are
                         dropped (default a second of arrivals, at least 10 × concurrency)
  --mix SPEC             mixed weights (default charge=50,status=40,lifecycle=10)
  --orders N             status/mixed/search: orders created before the window to read or
                         search (default 500); they go round N/20 customers in turn, so each
                         customer's 20 orders are spread over the whole pool
  --pool-file FILE       status/mixed/search: read these existing order ids (one per line)
                         instead, e.g. a pool recorded by an earlier run's --record-orders
  --record-orders FILE   write the id of every acknowledged charge to FILE, the pool's too
  --requests N           stop after N measured iterations (default 0: the duration decides)
  --timeout D            per request, and the lifecycle's wait for authorisation (default 10s)
  --webhook-wait D       webhooks: wait this long after the window for notifications (default 10s)

output:
  --runs N               run the workload N times (with --spawn, each on fresh nodes) and print
                         the median of the runs' figures after their tables (default 1)
  --json FILE            write the result as JSON (with --runs N > 1, an array of the N results)
  --cpu-profile FILE     write a CPU profile (pprof) of gatewaybench itself over the run: the
                         harness shares the machine with the nodes (theirs: --profile-dir)
  --profile-dir DIR      take a CPU and an allocation profile of every node over the window into
                         DIR (DIR/runN with --runs), and print where each node's CPU went by layer
                         and what it allocated per request

stalls reads a Go execution trace of a node, taken during a run with
  curl -o trace.out 'http://127.0.0.1:6060/debug/pprof/trace?seconds=4'
from gatewayd --pprof-addr 127.0.0.1:6060, cuts it into slices and prints the
slices where goroutines waited longest for a CPU, with what ran and what sat in
system calls in them, and every system call over --syscall-over with its stack.

layers prints where the CPU of each profile went, by layer of the gateway (the
breakdown --profile-dir prints), for profiles taken by hand, e.g.
  curl -o cpu.pb.gz 'http://127.0.0.1:6060/debug/pprof/profile?seconds=8'

Exit status: 0 after a run (failed requests are counted, not fatal), 1 when the
run could not start (or compare, stalls or layers could not read its files), 2 for a
usage error, 130 when interrupted (the partial result is still printed and
written).
`

// Main is the CLI: args without the program name. Cancelling ctx (Ctrl-C)
// ends a run early; spawned nodes are always stopped before Main returns.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, Usage)
		return ExitUsage
	}
	switch args[0] {
	case "run":
		return mainRun(ctx, args[1:], stdout, stderr)
	case "compare":
		return mainCompare(args[1:], stdout, stderr)
	case "stalls":
		return mainStalls(args[1:], stdout, stderr)
	case "layers":
		return mainLayers(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, Usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "gatewaybench: unknown command %q\n\n%s", args[0], Usage)
	return ExitUsage
}

// runArgs is what the run command's flags say.
type runArgs struct {
	cfg             Config
	spawn           int
	gatewayd        string
	settleDelayUnit string
	gatewaydFlags   []string // --gatewayd-flag, in order
	readyTimeout    time.Duration
	leaderOnly      bool // --spawn 3: every request to the leader
	runs            int  // --runs: runs of the workload, medians printed after
	jsonPath        string
	cpuProfile      string
	profileDir      string // --profile-dir; each run's own is cfg.ProfileDir
}

func parseRunArgs(args []string) (runArgs, error) {
	var ra runArgs
	fs := flag.NewFlagSet("gatewaybench run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var targets, mix string
	fs.StringVar(&targets, "target", "", "")
	fs.IntVar(&ra.spawn, "spawn", 0, "")
	fs.StringVar(&ra.gatewayd, "gatewayd", "", "")
	fs.StringVar(&ra.settleDelayUnit, "settle-delay-unit", DefaultSettleDelayUnit, "")
	fs.DurationVar(&ra.readyTimeout, "ready-timeout", defaultReadyTimeout, "")
	fs.BoolVar(&ra.leaderOnly, "leader-only", false, "")
	fs.IntVar(&ra.runs, "runs", 1, "")
	fs.StringVar(&ra.cfg.MerchantKey, "merchant-key", "", "")
	fs.StringVar(&ra.cfg.MerchantSecret, "merchant-secret", "", "")
	fs.StringVar(&ra.cfg.WebhookKey, "webhook-key", "", "")
	fs.StringVar(&ra.cfg.WebhookSecret, "webhook-secret", "", "")
	fs.StringVar(&ra.cfg.Workload, "workload", WorkloadCharge, "")
	fs.IntVar(&ra.cfg.Concurrency, "concurrency", DefaultConcurrency, "")
	fs.DurationVar(&ra.cfg.Duration, "duration", DefaultDuration, "")
	fs.DurationVar(&ra.cfg.Warmup, "warmup", 0, "")
	fs.Float64Var(&ra.cfg.Rate, "rate", 0, "")
	fs.IntVar(&ra.cfg.Queue, "queue", 0, "")
	fs.StringVar(&mix, "mix", DefaultMix, "")
	fs.IntVar(&ra.cfg.Orders, "orders", DefaultOrders, "")
	fs.StringVar(&ra.cfg.PoolFile, "pool-file", "", "")
	fs.StringVar(&ra.cfg.RecordOrders, "record-orders", "", "")
	fs.Int64Var(&ra.cfg.Requests, "requests", 0, "")
	fs.DurationVar(&ra.cfg.Timeout, "timeout", DefaultTimeout, "")
	fs.DurationVar(&ra.cfg.WebhookWait, "webhook-wait", DefaultWebhookWait, "")
	fs.StringVar(&ra.jsonPath, "json", "", "")
	fs.StringVar(&ra.cpuProfile, "cpu-profile", "", "")
	fs.StringVar(&ra.profileDir, "profile-dir", "", "")
	var pids, pprofAddrs string
	fs.StringVar(&pids, "node-pids", "", "")
	fs.StringVar(&pprofAddrs, "node-pprof", "", "")
	fs.Func("gatewayd-flag", "", func(v string) error {
		ra.gatewaydFlags = append(ra.gatewaydFlags, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return ra, err
	}
	if fs.NArg() > 0 {
		return ra, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	// Config reads zero as "default"; on the command line a zero is a mistake.
	switch c := ra.cfg; {
	case c.Concurrency <= 0, c.Orders <= 0:
		return ra, errors.New("--concurrency and --orders must be positive")
	case c.Duration <= 0, c.Timeout <= 0, ra.readyTimeout <= 0, c.WebhookWait <= 0:
		return ra, errors.New("--duration, --timeout, --ready-timeout and --webhook-wait must be positive")
	case c.Queue < 0, c.Queue == 0 && flagGiven(fs, "queue"):
		return ra, errors.New("--queue must be positive")
	case flagGiven(fs, "queue") && c.Rate == 0:
		return ra, errors.New("--queue is the open loop's: it goes with --rate")
	case flagGiven(fs, "mix") && c.Workload != WorkloadMixed:
		return ra, errors.New("--mix goes with --workload mixed")
	}
	switch {
	case targets == "" && ra.spawn == 0:
		return ra, errors.New("give --target or --spawn")
	case targets != "" && ra.spawn != 0:
		return ra, errors.New("give --target or --spawn, not both")
	case ra.spawn != 0 && ra.spawn != 1 && ra.spawn != 3:
		return ra, fmt.Errorf("--spawn %d: 1 or 3", ra.spawn)
	case ra.spawn != 0 && (ra.cfg.MerchantKey != "" || ra.cfg.WebhookKey != ""):
		return ra, errors.New("--spawn creates its own merchant: drop the key flags")
	case ra.spawn == 0 && (ra.gatewayd != "" || len(ra.gatewaydFlags) > 0):
		return ra, errors.New("--gatewayd and --gatewayd-flag need --spawn")
	case ra.spawn != 0 && pids != "":
		return ra, errors.New("--spawn reports its own nodes' CPU: drop --node-pids")
	case ra.spawn != 0 && pprofAddrs != "":
		return ra, errors.New("--spawn profiles its own nodes: drop --node-pprof")
	case pprofAddrs != "" && ra.profileDir == "":
		return ra, errors.New("--node-pprof goes with --profile-dir")
	case ra.runs < 1:
		return ra, errors.New("--runs must be at least 1")
	case ra.leaderOnly && ra.spawn != 3:
		return ra, errors.New("--leader-only goes with --spawn 3 (with --target, name the leader's address)")
	}
	for _, p := range strings.Split(pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		pid, err := strconv.Atoi(p)
		if err != nil || pid <= 0 {
			return ra, fmt.Errorf("--node-pids: %q is not a process id", p)
		}
		ra.cfg.Nodes = append(ra.cfg.Nodes, NodeProcess{Name: "pid " + p, PID: pid})
	}
	for _, a := range strings.Split(pprofAddrs, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return ra, fmt.Errorf("--node-pprof: %q is not host:port", a)
		}
		ra.cfg.Nodes = append(ra.cfg.Nodes, NodeProcess{Name: "pprof " + a, PprofAddr: a})
	}
	for _, t := range strings.Split(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			ra.cfg.Targets = append(ra.cfg.Targets, t)
		}
	}
	if ra.cfg.Workload == WorkloadMixed {
		m, err := ParseMix(mix)
		if err != nil {
			return ra, err
		}
		ra.cfg.Mix = m
	}
	if ra.spawn != 0 {
		// Checked again with the spawned targets and keys; everything else now,
		// before a build or a cluster start.
		probe := ra.cfg
		probe.Targets = []string{"http://127.0.0.1:1"}
		probe.MerchantKey, probe.MerchantSecret = "k", "s"
		return ra, probe.Validate()
	}
	return ra, ra.cfg.Validate()
}

func mainRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ra, err := parseRunArgs(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, Usage)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatewaybench run: %v\n\n%s", err, Usage)
		return ExitUsage
	}
	cfg := ra.cfg
	cfg.Log = stderr
	if isTerminal(stdout) {
		cfg.Progress = stdout
	}
	if ra.spawn != 0 && ra.gatewayd == "" {
		dir, err := os.MkdirTemp("", "gatewaybench-build-")
		if err != nil {
			fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
			return ExitNotStarted
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(stderr, "building gatewayd (go build ./cmd/gatewayd) ...")
		if ra.gatewayd, err = launch.BuildGatewayd(ctx, dir); err != nil {
			fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
			return ExitNotStarted
		}
	}
	// The harness's CPU profile starts with the first run's load, after
	// the build and the nodes' start, and ends with the last run.
	var stopProfile func()
	startProfile := func() error {
		if ra.cpuProfile == "" || stopProfile != nil {
			return nil
		}
		stop, err := startCPUProfile(ra.cpuProfile)
		stopProfile = stop
		return err
	}
	defer func() {
		if stopProfile != nil {
			stopProfile()
		}
	}()
	if ra.jsonPath != "" {
		// Found out now, not after the runs.
		if err := checkWritable(ra.jsonPath); err != nil {
			fmt.Fprintf(stderr, "gatewaybench: --json: %v\n", err)
			return ExitNotStarted
		}
	}
	var reps []*Report
	code := ExitOK
	for i := range ra.runs {
		if ra.runs > 1 {
			fmt.Fprintf(stdout, "run %d of %d\n", i+1, ra.runs)
		}
		cfg.ProfileDir = ra.profileDir
		if ra.profileDir != "" && ra.runs > 1 {
			cfg.ProfileDir = filepath.Join(ra.profileDir, fmt.Sprintf("run%d", i+1))
		}
		if cfg.ProfileDir != "" {
			if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
				fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
				return ExitNotStarted
			}
		}
		rep, err := runOnce(ctx, ra, cfg, stderr, startProfile)
		if err != nil {
			fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
			code = ExitNotStarted
			if ctx.Err() != nil {
				code = ExitInterrupted // Ctrl-C before the window (spawning, filling the pool)
			}
			break // the runs before it are still written
		}
		rep.WriteSummary(stdout)
		reps = append(reps, rep)
		if rep.Interrupted {
			code = ExitInterrupted
			break
		}
	}
	if len(reps) > 1 {
		WriteMedians(stdout, reps)
	}
	if ra.jsonPath != "" && len(reps) > 0 {
		var err error
		if ra.runs == 1 {
			err = reps[0].WriteJSON(ra.jsonPath)
		} else {
			err = WriteReportsJSON(ra.jsonPath, reps)
		}
		if err != nil {
			fmt.Fprintf(stderr, "gatewaybench: write %s: %v\n", ra.jsonPath, err)
			return ExitNotStarted
		}
	}
	return code
}

// runOnce makes one run of cfg; with --spawn, on nodes started for it (and
// stopped after it) with a merchant of their own. beforeLoad is called
// when all is ready, just before the load starts.
func runOnce(ctx context.Context, ra runArgs, cfg Config, log io.Writer, beforeLoad func() error) (*Report, error) {
	if ra.spawn != 0 {
		cluster, err := spawnForRun(ctx, ra, log)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := cluster.Close(); err != nil {
				fmt.Fprintf(log, "gatewaybench: cleaning up %s: %v\n", cluster.Dir, err)
			}
		}()
		m, err := cluster.CreateMerchant(ctx, "bench")
		if err != nil {
			return nil, err
		}
		cfg.Targets = cluster.Targets()
		if ra.leaderOnly {
			leader, err := cluster.LeaderTarget(ctx)
			if err != nil {
				return nil, err
			}
			cfg.Targets = []string{leader}
		}
		cfg.Nodes = cluster.Processes()
		cfg.MerchantKey, cfg.MerchantSecret = m.API.PublicKey, m.API.SecretKey
		cfg.WebhookKey, cfg.WebhookSecret = m.Webhook.PublicKey, m.Webhook.SecretKey
	}
	if err := beforeLoad(); err != nil {
		return nil, err
	}
	return Run(ctx, cfg)
}

// spawnForRun starts the cluster from ra.gatewayd (already built).
func spawnForRun(ctx context.Context, ra runArgs, log io.Writer) (*Cluster, error) {
	start := time.Now()
	cluster, err := Spawn(ctx, SpawnOptions{
		Binary:          ra.gatewayd,
		Nodes:           ra.spawn,
		SettleDelayUnit: ra.settleDelayUnit,
		ReadyTimeout:    ra.readyTimeout,
		ExtraArgs:       ra.gatewaydFlags,
		Pprof:           ra.profileDir != "",
		Log:             log,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "spawned %d node(s) in %s\n", ra.spawn, time.Since(start).Round(time.Millisecond))
	return cluster, nil
}

func mainCompare(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintf(stderr, "gatewaybench compare: want two JSON files, A and B\n\n%s", Usage)
		return ExitUsage
	}
	a, err := LoadReports(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
		return ExitNotStarted
	}
	b, err := LoadReports(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
		return ExitNotStarted
	}
	fmt.Fprintf(stdout, "A = %s\nB = %s\n", args[0], args[1])
	rows, note := Compare(a, b)
	WriteComparison(stdout, rows, note)
	for _, line := range cpuLines(a, b) {
		fmt.Fprintln(stdout, line)
	}
	for _, line := range layerLines(a, b) {
		fmt.Fprintln(stdout, line)
	}
	for _, note := range []string{loadNote(a, b), stealNote(a, b), damonNote(a, b), readsNote(a, b), droppedNote(a, b)} {
		if note != "" {
			fmt.Fprintln(stdout, note)
		}
	}
	return ExitOK
}

// mainStalls is the stalls command: a node's execution trace cut into
// slices.
func mainStalls(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatewaybench stalls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	slice := fs.Duration("slice", 10*time.Millisecond, "length of a slice")
	top := fs.Int("top", 15, "slices to print")
	syscallOver := fs.Duration("syscall-over", 5*time.Millisecond, "list system calls at least this long")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() != 1 || *slice <= 0 || *top <= 0 || *syscallOver <= 0 {
		fmt.Fprintf(stderr, "gatewaybench stalls: want one trace file, and positive --slice, --top and --syscall-over\n\n%s", Usage)
		return ExitUsage
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
		return ExitNotStarted
	}
	defer f.Close()
	a, err := AnalyzeTrace(bufio.NewReader(f), *slice, *syscallOver)
	if err != nil {
		fmt.Fprintf(stderr, "gatewaybench: %s: %v\n", fs.Arg(0), err)
		return ExitNotStarted
	}
	a.WriteStalls(stdout, *top)
	return ExitOK
}

// mainLayers is the layers command: CPU profiles cut into the gateway's
// layers.
func mainLayers(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "gatewaybench layers: want one or more CPU profiles\n\n%s", Usage)
		return ExitUsage
	}
	for _, path := range args {
		p, err := readProfileFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "gatewaybench: %v\n", err)
			return ExitNotStarted
		}
		b, err := BreakDownCPU(p)
		if err != nil {
			fmt.Fprintf(stderr, "gatewaybench: %s: %v\n", path, err)
			return ExitNotStarted
		}
		fmt.Fprintf(stdout, "%s: %.1fs of CPU sampled over %s; system calls %.1f%%\n",
			path, b.CPUSeconds, time.Duration(p.DurationNanos).Round(time.Millisecond), 100*b.SyscallShare)
		for _, l := range b.Layers {
			fmt.Fprintf(stdout, "  %5.1f%%  %s\n", 100*l.Share, l.Name)
		}
	}
	return ExitOK
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startCPUProfile profiles this process into path until the returned
// function is called. It starts after any --spawn build and cluster start,
// so the profile is of the run alone.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// flagGiven reports whether the command line set the flag named name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
