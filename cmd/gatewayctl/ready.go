package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// gatewayctl ready: the container health check. The image carries no curl
// or shell tools to probe with, so the CLI asks the node's /readyz itself.

func init() {
	register("ready", "exit 0 when the node answers /readyz 200 (a container health check)", runReady)
}

func runReady(args []string) int { return readyCmd(args, os.Stdout, os.Stderr) }

func readyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gatewayctl ready", flag.ContinueOnError)
	addr := fs.String("addr", envOr("GATEWAY_HTTP_ADDR", "127.0.0.1:8080"), "the node's HTTP address, host:port or http://host:port (0.0.0.0 means this host)")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	quiet := fs.Bool("quiet", false, "print nothing when ready")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	base, err := memberURL(localAddr(*addr))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		fmt.Fprintf(stderr, "not ready: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "not ready: %s %s\n", resp.Status, body)
		return 1
	}
	if !*quiet {
		fmt.Fprintf(stdout, "ready: %s\n", body)
	}
	return 0
}

// localAddr turns a listen address on every interface (0.0.0.0:8080, [::]:8080,
// :8080: what a container's node listens on) into one to connect to here.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
