package node

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/paygate/gateway/actors"
	"github.com/paygate/gateway/cluster"
	clusterlink "github.com/paygate/gateway/cluster/link"
	"github.com/paygate/gateway/persistence"
	"github.com/paygate/gateway/persistence/command"
	"github.com/paygate/gateway/persistence/vault"
	"github.com/paygate/gateway/transport/acquirer/host"
	"github.com/paygate/gateway/transport/acquirer/link"
	"github.com/paygate/gateway/transport/server"
	"github.com/paygate/gateway/transport/signature"
	"github.com/paygate/gateway/transport/webhook"
	"github.com/paygate/gateway/transport/webhook/outbox"
)

// Node is a running gateway node.
type Node struct {
	cfg       Config
	logger    *slog.Logger
	store     *persistence.Store
	raft      *cluster.Node
	system    *actor.ActorSystem
	registry  *actors.Registry
	merchants *server.Merchants
	vault     *vault.Vault
	server    *server.Server
	listener  net.Listener
	// acquirerLink is the connection to the acquirer host; acquirerHost
	// the sandbox host run in-process without --acquirer-addr (nil with it).
	acquirerLink *link.Client
	// acquirers routes each order's messages to its MID's host, over a
	// link per host, or to acquirerLink (contract 12).
	acquirers    *link.Router
	acquirerHost *host.Host
	webhooks     *webhook.Dispatcher
	// hookClient delivers notifications; its idle connections to
	// merchants' servers are closed on shutdown.
	hookClient *webhook.Client
	// gauges read this node's actors at each scrape; unregistered on
	// shutdown, so they never report a stopped node.
	gauges *metrics.Set
	// clusterLink is the cluster port (cluster/link); pki the node's certificates
	// (clustertls.go); peers asks other members over the link.
	clusterLink *clusterlink.Link
	pki         *clusterPKI
	peers       *server.PeerClient
	// joinRaft is the cluster port of the member --join named (join.go).
	joinRaft string
	// httpCert serves the HTTP listener's TLS certificate (httptls.go).
	httpCert *certReloader
	// legacyHashKey is the request-hash key as versions before its record
	// derived it from the (oldest) vault key: the key this node hashes with
	// until the replicated one is in its store, and the one a leader
	// records when there is none yet (hashkey.go).
	legacyHashKey []byte

	leaderMu     sync.Mutex
	leaderCancel context.CancelFunc
	leaderDone   chan struct{} // closed when the current leaderWork returned
	bg           sync.WaitGroup
	stopLeader   chan struct{}
	serveErr     chan error
}

// Start opens the node's state, joins or bootstraps raft and starts serving.
func Start(cfg Config, logger *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.RestoreFile != "" {
		// Before the data dir is made: restoring refuses one that holds anything.
		hdr, err := restoreFrom(cfg, cfg.RestoreFile) // backup.go
		if err != nil {
			return nil, err
		}
		logger.Info("restoring a backup as a new single-node cluster", "file", cfg.RestoreFile,
			"applied_index", hdr.AppliedIndex, "backup_node_id", hdr.NodeID, "backup_created_at", hdr.CreatedAt)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: logger, stopLeader: make(chan struct{}), serveErr: make(chan error, 1)}
	ok := false
	defer func() {
		if !ok {
			n.closeAll()
		}
	}()

	kek, err := loadKEK(cfg, logger)
	if err != nil {
		return nil, err
	}
	var oldestKEK []byte
	if n.vault, oldestKEK, err = loadVault(cfg, kek, logger); err != nil { // vault.go
		return nil, err
	}
	n.legacyHashKey = derive(oldestKEK, "request-hash") // hashkey.go
	if n.store, err = persistence.OpenSized(filepath.Join(cfg.DataDir, "state"), logger,
		persistence.Options{BlockCacheBytes: cfg.CacheSizeMiB << 20, HistoryCacheBytes: historyCacheBytes(cfg.HistoryCacheMiB)}); err != nil {
		return nil, err
	}
	if cfg.RestoreFile != "" {
		if err := n.restoreStore(cfg.RestoreFile); err != nil { // backup.go
			return nil, fmt.Errorf("--restore %s: %w", cfg.RestoreFile, err)
		}
	}
	fsm, err := cluster.NewFSM(cluster.StoreState(n.store), logger)
	if err != nil {
		return nil, err
	}
	n.merchants = server.NewMerchants(n.vault)
	if err := n.loadMerchants(); err != nil {
		return nil, err
	}
	fsm.OnCommit = n.onCommit
	linkTLS, err := n.clusterIdentity() // clustertls.go; a joiner gets its certificate here
	if err != nil {
		return nil, err
	}
	if n.clusterLink, err = clusterlink.Listen(clusterlink.Config{Addr: cfg.RaftAddr, Advertise: cfg.AdvertiseRaftAddr, TLS: linkTLS, Logger: logger}); err != nil {
		return nil, err
	}
	dialPeer := func(addr string, timeout time.Duration) (net.Conn, error) {
		return n.clusterLink.Dial(addr, clusterlink.KindPeer, timeout)
	}
	n.peers = server.NewPeerClient(dialPeer)
	n.raft, err = cluster.Start(cluster.Config{
		StreamLayer: n.clusterLink.RaftLayer(),
		NodeID:      cfg.NodeID, RaftAddr: cfg.AdvertiseRaftAddr, DataDir: cfg.DataDir, RaftLogDir: cfg.RaftLogDir, Bootstrap: cfg.Join == "",
		Logger: logger, HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
		SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval, HTTPAddr: cfg.AdvertiseHTTPAddr,
		WALSegmentBytes: cfg.WALSegmentBytes, SnapshotBytesPerSec: cfg.SnapshotRateMiB << 20,
	}, fsm)
	if err != nil {
		return nil, err
	}

	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With("component", "actors")
	}))
	var acq actors.Acquirer = cfg.acquirer // tests only: a function call instead of the link
	if acq == nil {
		if acq, err = n.startAcquirer(cfg, logger); err != nil { // acquirer.go
			return nil, err
		}
	}
	deps := &actors.Deps{
		Proposer: n.raft, Store: n.store, Acquirer: meterAcquirer(acq), Vault: n.vault, Logger: logger,
		Now: time.Now, NewID: newID, SettleUnit: cfg.SettleDelayUnit, TokenTTL: cfg.TokenTTL,
		ProposeTimeout: 10 * time.Second, AuthAttempts: 5,
		ThreeDS: n.threeDS(), // forms.go
	}
	n.registry = actors.NewRegistry(n.system, actors.NewOrderActorProducer(deps, func() *actors.Registry { return n.registry }))

	guard := &webhook.Guard{AllowPrivate: cfg.AllowPrivateCallbacks}
	n.hookClient = webhook.NewClient(webhook.Config{Guard: guard, UserAgent: "paygate-webhooks/1"})
	n.webhooks = webhook.NewDispatcher(n.system, webhook.DispatcherConfig{
		Store: n.store, Proposer: n.raft, Logger: logger, Now: time.Now, Attempt: n.hookClient.Deliver,
		Keys: func(id string) (string, *signature.Key, bool) {
			m := n.merchants.ByID(id)
			if m == nil {
				return "", nil, false
			}
			return m.WebhookPublicKey, m.WebhookKey(), true
		},
		RetryDelays: cfg.WebhookRetryDelays,
		Poll:        time.Second, // retries are timed exactly; this is the safety net
	})

	n.gauges = metrics.NewSet()
	n.gauges.NewGauge(`gateway_order_actors_live`, func() float64 { return float64(n.registry.Live()) })
	n.gauges.NewGauge(`gateway_webhook_endpoints`, func() float64 { return float64(n.webhooks.Endpoints()) })
	n.gauges.NewGauge(`gateway_webhook_endpoints_full`, func() float64 { return float64(n.webhooks.FullEndpoints()) })
	n.registerNodeMetrics() // metrics.go
	metrics.RegisterSet(n.gauges)

	wallets, err := n.wallets()
	if err != nil {
		return nil, err
	}
	n.server = server.New(server.Config{
		Logger: logger, Store: n.store, Cluster: n.raft, Registry: n.registry, Vault: n.vault,
		Merchants: n.merchants, AdminToken: cfg.AdminToken, HashKey: n.currentHashKey(), // hashkey.go
		CheckCallbackURL: guard.CheckURL, OnNotify: n.webhooks.Wake,
		Wallets: wallets, Forms: n.forms(), VaultCount: n.CountUnderPrevious,
		DialPeer: dialPeer, PKI: n.pki, OperatorIdleTimeout: cfg.OperatorIdleTimeout,
	})
	n.mountDashboard(logger)                          // dashboard.go
	if n.listener, err = n.listenHTTP(); err != nil { // httptls.go
		return nil, err
	}
	go func() { n.serveErr <- n.server.Serve(n.listener) }()
	go n.server.ServePeers(n.clusterLink.Listener(clusterlink.KindPeer))
	go n.server.ServeJoins(n.clusterLink.Listener(clusterlink.KindJoin))

	n.bg.Add(2)
	go n.watchLeadership()
	go n.maintainMembership() // cluster.go
	if cfg.BackupDir != "" {
		n.bg.Add(1)
		go n.scheduledBackups() // backup.go
	}
	n.bg.Add(1)
	go n.countVault() // vault.go
	// Certificates the cluster made are renewed while the node runs.
	if linkTLS != nil && cfg.ClusterCAFile == "" {
		n.bg.Add(1)
		go n.renewLoop() // clustertls.go
	}
	ok = true
	return n, nil
}

// newID is a time-ordered unique id for transactions and cards.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

func loadKEK(cfg Config, logger *slog.Logger) ([]byte, error) {
	if cfg.VaultKeyFile != "" {
		if mode, exposed := vault.KeyFileExposed(cfg.VaultKeyFile); exposed {
			logger.Warn("the vault key file is open to its group or others, and whoever reads it opens every stored card: chmod 600 it",
				"file", cfg.VaultKeyFile, "mode", fmt.Sprintf("%04o", mode))
		}
		return vault.LoadKEK(cfg.VaultKeyFile)
	}
	return vault.DevKEK(cfg.DataDir)
}

// derive makes a purpose-bound subkey of the key-encryption key.
func derive(kek []byte, purpose string) []byte {
	m := hmac.New(sha256.New, kek)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func (n *Node) loadMerchants() error {
	recs, err := n.store.Merchants()
	if err != nil {
		return err
	}
	for i := range recs {
		if err := n.merchants.Put(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// onCommit runs on the FSM goroutine after each batch: keep the merchant
// directory current. It must not block.
func (n *Node) onCommit(created []*outbox.Notification, merchants []*command.Merchant) {
	if len(created) > 0 && n.webhooks != nil {
		n.webhooks.Offer(created)
	}
	if len(created) == 0 && len(merchants) == 0 {
		if err := n.loadMerchants(); err != nil { // after a snapshot restore
			n.logger.Error("reload merchants", "error", err)
		}
		return
	}
	for _, m := range merchants {
		if err := n.merchants.Put(m); err != nil {
			n.logger.Error("merchant record", "merchant_id", m.ID, "error", err)
		}
	}
}

// watchLeadership starts the leader-only work when this node leads and
// stops it (with every order actor) when it does not.
func (n *Node) watchLeadership() {
	defer n.bg.Done()
	ch := n.raft.Raft.LeaderCh()
	check := time.NewTicker(500 * time.Millisecond)
	defer check.Stop()
	leading, term := false, uint64(0)
	for {
		select {
		case <-n.stopLeader:
			n.setLeading(false)
			return
		case <-ch:
		case <-check.C:
		}
		// A new term restarts the work even when this node led before it
		// too: another leader may have left pending work in between.
		if now, t := n.raft.IsLeader(), n.raft.Term(); now != leading || (now && t != term) {
			leading, term = now, t
			n.setLeading(now)
		}
	}
}

func (n *Node) setLeading(leading bool) {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	if n.leaderCancel != nil {
		n.leaderCancel()
		n.leaderCancel = nil
		<-n.leaderDone // one term's schedules and dispatcher never overlap the next's
		n.registry.StopAll(false)
	}
	if !leading {
		return
	}
	n.logger.Info("leading: starting schedules", "node_id", n.cfg.NodeID, "term", n.raft.Term())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	n.leaderCancel, n.leaderDone = cancel, done
	go func() {
		defer close(done)
		n.leaderWork(ctx)
	}()
}

// leaderWork runs while this node leads: first a barrier so every committed
// entry is applied, then the durable schedules.
func (n *Node) leaderWork(ctx context.Context) {
	for {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := n.raft.LeaderBarrier(bctx)
		cancel()
		if err == nil {
			break
		}
		n.logger.Warn("leader barrier", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := n.raft.RecordSelf(ctx); err != nil {
		n.logger.Warn("record own member record", "error", err)
	}
	n.replicateCA(ctx)      // clustertls.go
	n.replicateHashKey(ctx) // hashkey.go
	if n.cfg.Dev {
		n.ensureDevMerchant()
	}
	poll := n.cfg.SettleDelayUnit / 10
	poll = min(max(poll, 5*time.Millisecond), time.Second)
	sched := &actors.Scheduler{Store: n.store, Registry: n.registry, Logger: n.logger, Now: time.Now, Poll: poll,
		ExpiryPoll: n.expiryPoll(), // forms.go
		Proposer:   n.raft, NotifyRetention: n.cfg.WebhookRetention,
		RetentionPoll: retentionPoll(n.cfg.WebhookRetention),
	}
	rewrapDone := make(chan struct{})
	go func() {
		defer close(rewrapDone)
		if n.vault.HasPrevious() {
			n.rewrapVault(ctx) // vault.go
		}
	}()
	defer func() { <-rewrapDone }()
	webhooksDone := make(chan struct{})
	go func() {
		defer close(webhooksDone)
		n.webhooks.Run(ctx)
	}()
	sessionsDone := make(chan struct{})
	go func() {
		defer close(sessionsDone)
		n.pruneSessions(ctx) // sessions.go
	}()
	sched.Run(ctx)
	<-webhooksDone
	<-sessionsDone
}

// retentionPoll is how often the leader looks for records past their
// retention: a tenth of the notification retention, at most a minute, so a
// notification outlives its retention by that much at most.
func retentionPoll(notifyRetention time.Duration) time.Duration {
	if notifyRetention <= 0 {
		return time.Minute
	}
	return min(max(notifyRetention/10, 10*time.Millisecond), time.Minute)
}

// ensureDevMerchant creates the sandbox merchant once.
func (n *Node) ensureDevMerchant() {
	if n.merchants.ByID(DevMerchantID) != nil {
		return
	}
	rec, _, err := server.NewMerchantRecord(n.vault, DevMerchantID, "sandbox", 1000, time.Now())
	if err != nil {
		n.logger.Error("dev merchant", "error", err)
		return
	}
	if _, err := n.raft.Propose(context.Background(), &command.Cmd{Merchant: rec}); err != nil {
		n.logger.Error("dev merchant", "error", err)
	}
}

// DevMerchant returns the sandbox merchant once it exists (--dev).
func (n *Node) DevMerchant(ctx context.Context) (*server.Merchant, error) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if m := n.merchants.ByID(DevMerchantID); m != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("dev merchant not created: no leader")
		case <-t.C:
		}
	}
}

// Addr is the HTTP listener's address.
func (n *Node) Addr() string { return n.listener.Addr().String() }

// Authenticator signs operators in and checks their sessions (the
// dashboard's operator.Authenticator; transport/server/sessions.go).
func (n *Node) Authenticator() *server.Auth { return n.server.Authenticator() }

// Ready reports whether the node can serve writes.
func (n *Node) Ready() bool { return n.raft.Ready() }

// ServeErr reports a fatal error of the HTTP server.
func (n *Node) ServeErr() <-chan error { return n.serveErr }

// handOverTimeout bounds a stopping leader's wait for another to take over.
// raft bounds the barrier by an election timeout and the transfer by one or
// two more, so this only matters with election timeouts over ~1.5 s.
const handOverTimeout = 5 * time.Second

// Shutdown hands leadership to another voter if this node leads, drains
// in-flight requests, stops accepting new ones, stops the actors and raft,
// and closes the store.
func (n *Node) Shutdown(ctx context.Context) error {
	var err error
	if n.raft != nil {
		// Hand leadership over while this node still serves: once it
		// follows, the requests that reach it are forwarded to the new
		// leader, and the other nodes forward there too.
		handCtx, cancel := context.WithTimeout(ctx, handOverTimeout)
		switch handed, herr := n.raft.HandOver(handCtx); {
		case herr != nil:
			n.logger.Warn("leadership not handed over before stopping", "error", herr)
		case handed:
			n.logger.Info("leadership handed over before stopping")
		}
		cancel()
	}
	if n.server != nil {
		err = n.server.Shutdown(ctx)
	}
	close(n.stopLeader)
	n.bg.Wait()
	n.closeAll()
	return err
}

func (n *Node) closeAll() {
	if n.gauges != nil {
		metrics.UnregisterSet(n.gauges, true)
	}
	if n.registry != nil {
		n.registry.StopAll(true)
	}
	if n.system != nil {
		n.system.Shutdown()
	}
	n.closeAcquirer()
	if n.hookClient != nil {
		n.hookClient.CloseIdleConnections()
	}
	if n.raft != nil {
		if err := n.raft.Shutdown(); err != nil {
			n.logger.Warn("raft shutdown", "error", err)
		}
	}
	if n.clusterLink != nil {
		n.clusterLink.Close() // raft's shutdown closed it already, unless raft never started
	}
	if n.httpCert != nil {
		n.httpCert.stop()
	}
	if n.store != nil {
		if err := n.store.Close(); err != nil {
			n.logger.Warn("store close", "error", err)
		}
		n.store = nil
	}
}

// Config returns the node's effective configuration (after --dev defaults).
func (n *Node) Config() Config { return n.cfg }

// historyCacheBytes is --history-cache-mib as persistence.Options takes it,
// where 0 means the default and a negative size none.
func historyCacheBytes(mib int64) int64 {
	if mib == 0 {
		return -1
	}
	return mib << 20
}
