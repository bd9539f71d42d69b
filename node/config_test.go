package node

import (
	"strings"
	"testing"
	"time"
)

func TestJoinAddressAcceptsHostPortOrHTTPURL(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"127.0.0.1:8081", "127.0.0.1:8081", true},
		{"http://127.0.0.1:8081", "127.0.0.1:8081", true},
		{"http://127.0.0.1:8081/", "127.0.0.1:8081", true},
		{"gw-1.internal:8081", "gw-1.internal:8081", true},
		{"http://[::1]:8081", "[::1]:8081", true},
		{"127.0.0.1", "", false},                              // no port
		{"https://127.0.0.1:8081", "127.0.0.1:8081", true},    // a member serving TLS (--http-tls-cert-file)
		{"http://127.0.0.1:8081/admin/v1/cluster", "", false}, // a path would be dropped
		{"http//127.0.0.1:8081", "", false},
	} {
		got, err := joinAddress(tc.in)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("joinAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if !tc.ok && err == nil {
			t.Errorf("joinAddress(%q) = %q; want an error", tc.in, got)
		}
	}
}

func TestValidateNormalisesJoin(t *testing.T) {
	c := Config{Join: "http://10.0.0.5:8081/", AdminToken: "t", Dev: true, SettleDelayUnit: 1, HTTPAddr: "127.0.0.1:0"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Join != "10.0.0.5:8081" {
		t.Fatalf("Join = %q, want 10.0.0.5:8081", c.Join)
	}
}

// Values that used to be read as a default or as "off" without a word are
// refused at start.
func TestValidateRefusesNegativeAndMalformedValues(t *testing.T) {
	valid := func() Config {
		return Config{Dev: true, SettleDelayUnit: time.Hour, HTTPAddr: "127.0.0.1:0", FormTTL: time.Minute}
	}
	for _, tc := range []struct {
		name, want string
		edit       func(*Config)
	}{
		{"form ttl", "--form-ttl", func(c *Config) { c.FormTTL = -5 * time.Minute }},
		{"acquirer latency", "--acquirer-latency", func(c *Config) { c.AcquirerLatency = -time.Second }},
		{"heartbeat", "--raft-heartbeat-timeout", func(c *Config) { c.HeartbeatTimeout = -time.Second }},
		{"election", "--raft-election-timeout", func(c *Config) { c.ElectionTimeout = -time.Second }},
		{"snapshot interval", "--raft-snapshot-interval", func(c *Config) { c.SnapshotInterval = -time.Second }},
		{"snapshot rate", "--raft-snapshot-rate-mib", func(c *Config) { c.SnapshotRateMiB = -3 }},
		{"cache size", "--cache-size-mib", func(c *Config) { c.CacheSizeMiB = -1 }},
		{"history cache size", "--history-cache-mib", func(c *Config) { c.HistoryCacheMiB = -1 }},
		{"segment", "--raft-wal-segment-bytes", func(c *Config) { c.WALSegmentBytes = -1 }},
		{"acquirer timeout", "--acquirer-timeout", func(c *Config) { c.AcquirerTimeout = -time.Second }},
		{"acquirer addr", "--acquirer-addr", func(c *Config) { c.AcquirerAddr = "acquirer.example" }},
		{"latency of a remote host", "--acquirer-latency", func(c *Config) {
			c.AcquirerAddr, c.AcquirerLatency = "127.0.0.1:8583", time.Second
		}},
		{"restore and join", "--restore", func(c *Config) { c.RestoreFile, c.Join, c.AdminToken = "b.pgbak", "127.0.0.1:8080", "t" }},
		{"backups without an interval", "--backup-interval", func(c *Config) { c.BackupDir, c.BackupKeep = "/tmp/b", 3 }},
		{"backups keeping none", "--backup-keep", func(c *Config) { c.BackupDir, c.BackupInterval = "/tmp/b", time.Hour }},
		{"form url without scheme", "--form-url", func(c *Config) { c.FormURL = "not a url" }},
		{"form url of another scheme", "--form-url", func(c *Config) { c.FormURL = "ftp://pay.example.com" }},
		{"form url with a query", "--form-url", func(c *Config) { c.FormURL = "https://pay.example.com/?a=1" }},
		{"idle timeout under a minute", "--operator-idle-timeout", func(c *Config) { c.OperatorIdleTimeout = 59 * time.Second }},
		{"negative idle timeout", "--operator-idle-timeout", func(c *Config) { c.OperatorIdleTimeout = -time.Minute }},
		{"idle timeout past the lifetime", "--operator-idle-timeout", func(c *Config) { c.OperatorIdleTimeout = 8*time.Hour + time.Second }},
	} {
		c := valid()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct{ set, want time.Duration }{
		{0, 15 * time.Minute}, {time.Minute, time.Minute}, {8 * time.Hour, 8 * time.Hour},
	} {
		c := valid()
		c.OperatorIdleTimeout = tc.set
		if err := c.Validate(); err != nil || c.OperatorIdleTimeout != tc.want {
			t.Errorf("--operator-idle-timeout %s: %s %v, want %s", tc.set, c.OperatorIdleTimeout, err, tc.want)
		}
	}
	if Defaults().OperatorIdleTimeout != 15*time.Minute {
		t.Errorf("default --operator-idle-timeout %s, want 15m", Defaults().OperatorIdleTimeout)
	}
	for _, formURL := range []string{"", "https://pay.example.com", "http://127.0.0.1:8080/", "https://example.com/gateway"} {
		c := valid()
		c.FormURL = formURL
		if err := c.Validate(); err != nil {
			t.Errorf("--form-url %q: %v", formURL, err)
		}
	}
}

// --dev prints and documents its admin token: on an address other machines
// may reach it needs a token of the operator's own.
func TestDevOnTheNetworkNeedsItsOwnAdminToken(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"localhost:8080", "", true},
		{"[::1]:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"0.0.0.0:8080", "an-operator-token", true},
	} {
		c := Config{Dev: true, SettleDelayUnit: time.Hour, HTTPAddr: tc.addr, AdminToken: tc.token}
		err := c.Validate()
		if tc.ok && err != nil {
			t.Errorf("--dev --http-addr %s, token %q: %v", tc.addr, tc.token, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "--admin-token")) {
			t.Errorf("--dev --http-addr %s without --admin-token: %v, want refused", tc.addr, err)
		}
		if tc.ok && tc.token == "" && c.AdminToken != DevAdminToken {
			t.Errorf("--dev --http-addr %s: admin token %q, want the development one", tc.addr, c.AdminToken)
		}
	}
}

// The member record holds the address peers forward to: an --http-addr on
// every interface names none, so a joining node needs --advertise-http-addr.
func TestAdvertisedHTTPAddr(t *testing.T) {
	for _, tc := range []struct {
		http, advertise, join string
		want                  string // AdvertiseHTTPAddr after Validate; "" for an error
	}{
		{"127.0.0.1:8080", "", "", "127.0.0.1:8080"},
		{"0.0.0.0:8080", "", "", "0.0.0.0:8080"}, // a first node may; joins to it are refused
		{"0.0.0.0:8080", "", "10.0.0.1:8081", ""},
		{":8080", "", "10.0.0.1:8081", ""},
		{"[::]:8080", "", "10.0.0.1:8081", ""},
		{"0.0.0.0:8080", "10.0.0.2:8080", "10.0.0.1:8081", "10.0.0.2:8080"},
		{"0.0.0.0:8080", "gw-2.internal:8080", "", "gw-2.internal:8080"},
		{"0.0.0.0:8080", "0.0.0.0:8080", "", ""},
		{"0.0.0.0:8080", "gw-2.internal", "", ""},
	} {
		c := Config{AdminToken: "t", VaultKeyFile: "k", SettleDelayUnit: time.Hour,
			HTTPAddr: tc.http, AdvertiseHTTPAddr: tc.advertise, Join: tc.join}
		err := c.Validate()
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("--http-addr %s --advertise-http-addr %q --join %q: accepted, want refused", tc.http, tc.advertise, tc.join)
		case tc.want != "" && (err != nil || c.AdvertiseHTTPAddr != tc.want):
			t.Errorf("--http-addr %s --advertise-http-addr %q --join %q: %q %v, want %q", tc.http, tc.advertise, tc.join, c.AdvertiseHTTPAddr, err, tc.want)
		}
	}
}

// Cluster-link and public-edge flags (contract section 11).
func TestSecurityFlags(t *testing.T) {
	base := func() Config {
		return Config{AdminToken: "t", VaultKeyFile: "k", SettleDelayUnit: time.Hour, HTTPAddr: "127.0.0.1:8080", RaftAddr: "127.0.0.1:7000"}
	}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		says string // "" when accepted
	}{
		{"defaults", func(*Config) {}, ""},
		{"insecure on loopback", func(c *Config) { c.InsecureClusterLinks = true }, ""},
		{"insecure on localhost", func(c *Config) { c.InsecureClusterLinks, c.RaftAddr = true, "localhost:7000" }, ""},
		{"insecure on every interface", func(c *Config) { c.InsecureClusterLinks, c.RaftAddr = true, "0.0.0.0:7000" }, "loopback"},
		{"insecure on a LAN address", func(c *Config) { c.InsecureClusterLinks, c.RaftAddr = true, "10.0.0.1:7000" }, "loopback"},
		{"insecure advertising a LAN address", func(c *Config) { c.InsecureClusterLinks, c.AdvertiseRaftAddr = true, "10.0.0.1:7000" }, "loopback"},
		{"insecure with a token", func(c *Config) { c.InsecureClusterLinks, c.JoinToken = true, "v1.x" }, "turns TLS off"},
		{"one certificate flag of three", func(c *Config) { c.NodeCertFile = "n.crt" }, "go together"},
		{"the three certificate flags", func(c *Config) { c.ClusterCAFile, c.NodeCertFile, c.NodeKeyFile = "ca", "n.crt", "n.key" }, ""},
		{"certificates and a token", func(c *Config) {
			c.ClusterCAFile, c.NodeCertFile, c.NodeKeyFile, c.JoinToken = "ca", "n.crt", "n.key", "v1.x"
		}, "--join-token"},
		{"HTTP certificate without its key", func(c *Config) { c.HTTPTLSCertFile = "c.pem" }, "go together"},
		{"pprof on loopback", func(c *Config) { c.PprofAddr = "127.0.0.1:6060" }, ""},
		{"pprof on every interface", func(c *Config) { c.PprofAddr = "0.0.0.0:6060" }, "loopback"},
		{"pprof with no host", func(c *Config) { c.PprofAddr = ":6060" }, "loopback"},
		{"join over https", func(c *Config) { c.Join = "https://10.0.0.1:8443" }, ""},
		// The acquirer link: TLS or loopback, or plain TCP off the machine
		// only when the operator says so.
		{"in-process host", func(*Config) {}, ""},
		{"plain TCP to loopback", func(c *Config) { c.AcquirerAddr = "127.0.0.1:8583" }, ""},
		{"plain TCP to localhost", func(c *Config) { c.AcquirerAddr = "localhost:8583" }, ""},
		{"plain TCP off the machine", func(c *Config) { c.AcquirerAddr = "10.0.0.5:8583" }, "--acquirer-ca-file"},
		{"plain TCP to a name", func(c *Config) { c.AcquirerAddr = "acquirer.internal:8583" }, "--insecure-acquirer-link"},
		{"insecure off the machine", func(c *Config) { c.AcquirerAddr, c.InsecureAcquirerLink = "10.0.0.5:8583", true }, ""},
		{"TLS off the machine", func(c *Config) { c.AcquirerAddr, c.AcquirerCAFile = "10.0.0.5:8583", "ca.crt" }, ""},
		{"mutual TLS", func(c *Config) {
			c.AcquirerAddr, c.AcquirerCAFile, c.AcquirerCertFile, c.AcquirerKeyFile = "10.0.0.5:8583", "ca.crt", "n.crt", "n.key"
		}, ""},
		{"client certificate without its key", func(c *Config) {
			c.AcquirerAddr, c.AcquirerCAFile, c.AcquirerCertFile = "10.0.0.5:8583", "ca.crt", "n.crt"
		}, "go together"},
		{"client certificate without a CA", func(c *Config) {
			c.AcquirerAddr, c.AcquirerCertFile, c.AcquirerKeyFile = "127.0.0.1:8583", "n.crt", "n.key"
		}, "--acquirer-ca-file"},
		{"insecure and a CA", func(c *Config) {
			c.AcquirerAddr, c.AcquirerCAFile, c.InsecureAcquirerLink = "10.0.0.5:8583", "ca.crt", true
		}, "turns the link's TLS off"},
		{"TLS flags without an address", func(c *Config) { c.AcquirerCAFile = "ca.crt" }, "in-process host"},
		{"insecure without an address", func(c *Config) { c.InsecureAcquirerLink = true }, "in-process host"},
	} {
		c := base()
		tc.set(&c)
		err := c.Validate()
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want refused saying %q", tc.name, err, tc.says)
		}
	}
	c := base()
	c.Join = "https://10.0.0.1:8443"
	if err := c.Validate(); err != nil || !c.JoinHTTPS || c.Join != "10.0.0.1:8443" {
		t.Errorf("--join https://: %v %v %q", err, c.JoinHTTPS, c.Join)
	}
}
