package deploy_test

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"

	"github.com/paygate/gateway/node/nodetest"
)

// plannedFlags are flags the deployment files give that gatewayd does not
// take yet, from the contract's sections being built alongside: each with
// the work that adds it. The test fails once gatewayd --help lists one
// (take it off) and when no file uses it any more.
var plannedFlags = map[string]string{}

// buildStatic builds commands the way the Dockerfile does (static, no cgo)
// into dir, in one go build so they share its work, and returns their paths
// by name. The first run on a machine compiles everything once more
// (cgo off is another build configuration); the build cache keeps it.
func buildStatic(t *testing.T, dir string, pkgs ...string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %v: %v\n%s", pkgs, err, b)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		out[filepath.Base(p)] = filepath.Join(dir, filepath.Base(p))
	}
	return out
}

// flagsOf lists the flags a Go program's --help prints.
func flagsOf(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(bin, "--help").CombinedOutput() // flag exits 0 or 2 on --help
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-{1,2}([a-z0-9][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if len(flags) == 0 {
		t.Fatalf("%s --help lists %d flags:\n%s", bin, len(flags), out)
	}
	return flags
}

// envFlag is the flag a GATEWAY_<NAME> variable sets, "" for another variable.
func envFlag(name string) string {
	rest, ok := strings.CutPrefix(name, "GATEWAY_")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
}

// flagChecker checks flags against gatewayd's and records which planned
// flags the files used.
type flagChecker struct {
	t     *testing.T
	known map[string]bool
	used  map[string]bool
}

func (c *flagChecker) check(where, flag string) {
	c.t.Helper()
	switch {
	case c.known[flag]:
		if plannedFlags[flag] != "" {
			c.t.Errorf("--%s, planned for %s, is now a gatewayd flag: take it off plannedFlags", flag, plannedFlags[flag])
		}
	case plannedFlags[flag] != "":
		c.used[flag] = true
	default:
		c.t.Errorf("%s: --%s is not a gatewayd flag", where, flag)
	}
}

// The image's binaries are static (they run in an image with no C
// library), the health check it runs is a real gatewayctl subcommand that
// tells a ready node from an absent one, and the Dockerfile builds them that
// way, as a non-root user, with that health check.
func TestImage(t *testing.T) {
	bins := buildStatic(t, t.TempDir(), "./cmd/gatewayd", "./cmd/gatewayctl")
	for name, bin := range bins {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s is dynamically linked (program header %v)", name, p.Type)
			}
		}
		f.Close()
	}

	n := nodetest.Start(t, nodetest.Options{})
	if out, err := exec.Command(bins["gatewayctl"], "ready", "--addr", n.HTTPAddr).CombinedOutput(); err != nil {
		t.Errorf("gatewayctl ready on a ready node: %v\n%s", err, out)
	}
	err := exec.Command(bins["gatewayctl"], "ready", "--addr", nodetest.FreeAddr(t), "--timeout", "2s").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("gatewayctl ready with no node: %v, want exit 1", err)
	}

	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users, health, entry []string
	for _, line := range strings.Split(string(df), "\n") {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch word {
		case "FROM":
			froms = append(froms, rest)
		case "USER":
			users = append(users, rest)
		case "HEALTHCHECK":
			health = append(health, rest)
		case "ENTRYPOINT":
			entry = append(entry, rest)
		}
	}
	if len(froms) < 2 {
		t.Errorf("Dockerfile: %d stages, want a build stage and a run stage", len(froms))
	}
	if !strings.Contains(string(df), "CGO_ENABLED=0") {
		t.Error("Dockerfile does not build with CGO_ENABLED=0")
	}
	if len(users) == 0 || regexp.MustCompile(`^(root|0)(:|$)`).MatchString(users[len(users)-1]) {
		t.Errorf("Dockerfile: the image runs as %v, want an unprivileged user", users)
	}
	if len(health) != 1 || !strings.Contains(string(df), `"/usr/local/bin/gatewayctl", "ready"`) {
		t.Errorf("Dockerfile: health check %v, want gatewayctl ready", health)
	}
	if len(entry) != 1 || !strings.Contains(entry[0], "/usr/local/bin/gatewayd") {
		t.Errorf("Dockerfile: entrypoint %v, want gatewayd", entry)
	}
}

type composeService struct {
	Image       string            `yaml:"image"`
	Entrypoint  any               `yaml:"entrypoint"`
	Command     any               `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Profiles []string `yaml:"profiles"`
}

// words flattens a compose command or entrypoint (a list or a string).
func words(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, w := range v {
			out = append(out, fmt.Sprint(w))
		}
		return out
	}
	return nil
}

// The compose file starts three nodes and the sandbox acquirer host; every
// flag and GATEWAY_ variable it gives is one gatewayd takes (or one of the
// contract's flags being built, plannedFlags); node1 bootstraps and the
// other two join it with a token that never shows on a command line; all
// share one vault key and admin token and differ in identity. Where Docker
// runs, the file is also built and started (docs/operations.md says which
// ran where).
func TestComposeFile(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `yaml:"services"`
		Secrets  map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	fc := &flagChecker{t: t, known: flagsOf(t, nodetest.Binary(t)), used: map[string]bool{}}
	nodes := []string{"node1", "node2", "node3"}
	seen := map[string]map[string]string{} // flag → node → value
	for _, name := range nodes {
		s, ok := doc.Services[name]
		if !ok {
			t.Fatalf("compose.yaml has no service %s", name)
		}
		flags := map[string]string{}
		for _, w := range words(s.Command) {
			f, ok := strings.CutPrefix(w, "--")
			if !ok {
				t.Errorf("%s: command word %q is not a --flag=value", name, w)
				continue
			}
			f, v, _ := strings.Cut(f, "=")
			fc.check(name, f)
			flags[f] = v
		}
		for k, v := range s.Environment {
			if f := envFlag(k); f != "" {
				fc.check(name+" environment", f)
				flags[f] = v
			}
		}
		for f, v := range flags {
			if seen[f] == nil {
				seen[f] = map[string]string{}
			}
			seen[f][name] = v
		}
		if strings.Join(s.Healthcheck.Test, " ") != "CMD /usr/local/bin/gatewayctl ready --quiet" {
			t.Errorf("%s: health check %v, want gatewayctl ready", name, s.Healthcheck.Test)
		}
		if !strings.Contains(flags["admin-token"], "${GATEWAY_ADMIN_TOKEN") {
			t.Errorf("%s: the admin token is %q, want it from the operator's GATEWAY_ADMIN_TOKEN", name, flags["admin-token"])
		}
		if flags["vault-key-file"] == "" || len(s.Secrets) == 0 {
			t.Errorf("%s: no vault key file from a compose secret", name)
		}
		if flags["acquirer-addr"] != "acquirer:8583" {
			t.Errorf("%s: --acquirer-addr %q, want the acquirer service", name, flags["acquirer-addr"])
		}
		// The link carries card numbers off the node's container: mutual TLS.
		if flags["acquirer-ca-file"] == "" || flags["acquirer-cert-file"] != "/acquirer-pki/"+name+".crt" || flags["insecure-acquirer-link"] != "" {
			t.Errorf("%s: the acquirer link is not mutual TLS with its own certificate (%v)", name, flags)
		}
		joining := name != "node1"
		if (flags["join"] != "") != joining {
			t.Errorf("%s: --join %q", name, flags["join"])
		}
		if joining {
			if flags["join"] != "node1:8080" || flags["join-token"] != "" {
				t.Errorf("%s: want --join node1:8080 and the token from the join volume, not a flag (%v)", name, flags)
			}
			entry := strings.Join(words(s.Entrypoint), " ")
			if !strings.Contains(entry, `GATEWAY_JOIN_TOKEN="$$(cat /join/token)"`) || !strings.Contains(entry, "exec /usr/local/bin/gatewayd") {
				t.Errorf("%s: entrypoint %q does not read the join token into GATEWAY_JOIN_TOKEN", name, entry)
			}
			fc.check(name+" entrypoint", envFlag("GATEWAY_JOIN_TOKEN"))
			if s.DependsOn["join-token"].Condition != "service_completed_successfully" {
				t.Errorf("%s: does not wait for the join token", name)
			}
		}
	}
	for _, f := range []string{"node-id", "raft-addr", "advertise-http-addr"} {
		if vals := seen[f]; len(vals) != 3 || vals["node1"] == vals["node2"] || vals["node2"] == vals["node3"] || vals["node1"] == vals["node3"] {
			t.Errorf("--%s: %v, want one per node, all different", f, vals)
		}
	}
	for _, f := range []string{"admin-token", "vault-key-file"} {
		if vals := seen[f]; len(vals) != 3 || vals["node1"] != vals["node2"] || vals["node2"] != vals["node3"] {
			t.Errorf("--%s: %v, want the same on every node", f, vals)
		}
	}
	if doc.Secrets["vault_key"].File == "" {
		t.Error("compose.yaml: no vault_key secret file")
	}

	jt := doc.Services["join-token"]
	script := strings.Join(words(jt.Command), " ")
	if !strings.Contains(script, "/admin/v1/cluster/join-token") || jt.DependsOn["node1"].Condition != "service_healthy" {
		t.Errorf("join-token: %q, want POST /admin/v1/cluster/join-token once node1 is healthy", script)
	}

	acq := doc.Services["acquirer"]
	if e := words(acq.Entrypoint); len(e) != 1 || e[0] != "/usr/local/bin/acquirerd" {
		t.Errorf("acquirer: entrypoint %v, want acquirerd", e)
	}
	acqFlags := flagsOf(t, buildStatic(t, t.TempDir(), "./cmd/acquirerd")["acquirerd"])
	if acq.Environment["ACQUIRERD_ADMIN_TOKEN"] == "" || !strings.Contains(acq.Environment["ACQUIRERD_ADMIN_TOKEN"], "${") {
		t.Errorf("acquirer: its HTTP side listens off loopback and needs ACQUIRERD_ADMIN_TOKEN from the operator's environment")
	}
	for _, w := range words(acq.Command) {
		if f, ok := strings.CutPrefix(w, "--"); ok && !acqFlags[f] {
			t.Errorf("acquirer: --%s is not an acquirerd flag", f)
		}
	}
	if cmd := strings.Join(words(acq.Command), " "); !strings.Contains(cmd, "--tls-cert-file") || !strings.Contains(cmd, "--client-ca-file") {
		t.Errorf("acquirer: %q, want a TLS listener that asks for client certificates", cmd)
	}
	fc.checkPlannedUsed(t, "compose.yaml")

	if dockerWorks() {
		composeUp(t)
	} else {
		t.Log("no Docker daemon: compose.yaml checked by its structure only, not built or started")
	}
}

func (c *flagChecker) checkPlannedUsed(t *testing.T, file string) {
	t.Helper()
	for f, by := range plannedFlags {
		if !c.used[f] && !c.known[f] {
			t.Errorf("plannedFlags lists --%s (%s), which %s does not use", f, by, file)
		}
	}
}

// dockerWorks reports whether a Docker daemon and the compose plugin answer.
func dockerWorks() bool {
	return exec.Command("docker", "info").Run() == nil && exec.Command("docker", "compose", "version").Run() == nil
}

// composeUp builds the image, starts the compose cluster and waits until
// every node is healthy (ready), then removes it.
func composeUp(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "vault.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("ab", 32)), 0o444); err != nil {
		t.Fatal(err)
	}
	compose := func(args ...string) *exec.Cmd {
		cmd := exec.Command("docker", append([]string{"compose", "-f", "compose.yaml", "-p", "paygate-test"}, args...)...)
		cmd.Env = append(os.Environ(), "GATEWAY_ADMIN_TOKEN=compose-test-token", "ACQUIRERD_ADMIN_TOKEN=compose-test-acquirer-token")
		return cmd
	}
	// The secret file is the operator's; the test gives its own.
	if err := os.MkdirAll("secrets", 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("secrets/vault.key"); os.IsNotExist(err) {
		os.WriteFile("secrets/vault.key", []byte(strings.Repeat("ab", 32)), 0o444)
		t.Cleanup(func() { os.Remove("secrets/vault.key") })
	}
	t.Cleanup(func() { compose("down", "-v").Run() })
	if out, err := compose("up", "-d", "--build", "--wait", "--wait-timeout", "300").CombinedOutput(); err != nil {
		logs, _ := compose("logs").CombinedOutput()
		t.Fatalf("docker compose up: %v\n%s\n%s", err, out, logs)
	}
	out, err := compose("ps", "--format", "{{.Service}} {{.Health}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		if !strings.Contains(string(out), n+" healthy") {
			t.Errorf("%s is not healthy:\n%s", n, out)
		}
	}
}

// The systemd unit runs gatewayd as an unprivileged user with the
// hardening options, reads its flags (the admin token among them) from an
// environment file rather than a command line, and is valid to systemd
// (systemd-analyze verify, against the real binary), whose own security
// review rates its exposure low.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("systemd/gatewayd.service")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(string(unit)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = append(keys[k], v)
		}
	}
	for k, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ReadWritePaths": "/var/lib/gateway",
		"PrivateTmp": "yes", "ProtectHome": "yes", "PrivateDevices": "yes", "CapabilityBoundingSet": "",
		"User": "gateway", "ExecStart": "/usr/local/bin/gatewayd", "EnvironmentFile": "/etc/gateway/gatewayd.env",
		"KillSignal": "SIGTERM", "RestrictSUIDSGID": "yes", "MemoryDenyWriteExecute": "yes",
	} {
		if v := keys[k]; len(v) != 1 || v[0] != want {
			t.Errorf("gatewayd.service: %s=%v, want %q", k, v, want)
		}
	}
	if strings.Contains(string(unit), "ADMIN_TOKEN=") || strings.Contains(string(unit), "--admin-token") {
		t.Error("gatewayd.service carries the admin token itself: it belongs in the environment file")
	}

	// The example environment file names only gatewayd's flags.
	fc := &flagChecker{t: t, known: flagsOf(t, nodetest.Binary(t)), used: map[string]bool{}}
	env, err := os.ReadFile("systemd/gatewayd.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		k, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "#"), "=")
		if f := envFlag(k); ok && f != "" {
			fc.check("gatewayd.env.example", f)
		}
	}
	fc.checkPlannedUsed(t, "gatewayd.env.example")

	analyze := nodetest.Tool(t, "systemd-analyze")
	// verify needs the binary ExecStart names to exist: point it at the
	// one built here, nothing else changed.
	dir := t.TempDir()
	copyUnit := filepath.Join(dir, "gatewayd.service")
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/gatewayd", "ExecStart="+nodetest.Binary(t), 1)
	if err := os.WriteFile(copyUnit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyUnit).CombinedOutput()
	if err != nil || strings.Contains(string(out), "gatewayd.service") {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=true", copyUnit).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for gatewayd.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2.0 {
		t.Errorf("systemd-analyze security rates the unit's exposure %.1f, want at most 2.0:\n%s", level, out)
	} else {
		t.Logf("systemd-analyze security: exposure %.1f", level)
	}
}
