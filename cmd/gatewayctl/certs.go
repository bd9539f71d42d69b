package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/paygate/gateway/cluster/pki"
)

// gatewayctl certs create-ca|create-node: certificates of the cluster links
// for an operator who keeps the CA key off the nodes (docs/security.md).

func init() {
	register("certs", "make the cluster links' CA and node certificates (create-ca, create-node)", runCerts)
}

const certsUsage = `usage:
  gatewayctl certs create-ca   --dir D
  gatewayctl certs create-node --dir D --node-id ID --addr HOST[,HOST...]

create-ca writes D/ca.crt and D/ca.key (mode 600). create-node signs, with
D/ca.key, a certificate for one node: D/<ID>.crt and D/<ID>.key (mode 600),
naming HOST (the host of its --raft-addr; more for every name it is dialled
by). Start the node with --cluster-ca-file D/ca.crt --node-cert-file
D/<ID>.crt --node-key-file D/<ID>.key; ca.key stays with the operator.
`

func runCerts(args []string) int { return certsCmd(args, os.Stdout, os.Stderr) }

func certsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, certsUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("gatewayctl certs "+sub, flag.ContinueOnError)
	dir := fs.String("dir", "", "folder of the CA (and of the node certificates made with it)")
	var nodeID, addrs *string
	switch sub {
	case "create-ca":
	case "create-node":
		nodeID = fs.String("node-id", "", "the node's --node-id")
		addrs = fs.String("addr", "", "hosts the node is dialled by on its cluster port, comma-separated (the host of --raft-addr)")
	default:
		fmt.Fprintf(stderr, "gatewayctl certs: unknown subcommand %q\n\n%s", sub, certsUsage)
		return 2
	}
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "gatewayctl certs "+sub+": --dir is required")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "gatewayctl certs "+sub+":", err)
		return 1
	}
	if sub == "create-ca" {
		ca, err := pki.CreateCAFiles(*dir, "paygate cluster CA")
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "wrote %s and %s (keep ca.key off the nodes)\nCA fingerprint sha256:%s\n",
			filepath.Join(*dir, pki.CACertFile), filepath.Join(*dir, pki.CAKeyFile), ca.Fingerprint())
		return 0
	}
	if *nodeID == "" || *addrs == "" || strings.ContainsAny(*nodeID, "/\\") {
		fmt.Fprintln(stderr, "gatewayctl certs create-node: --node-id and --addr are required")
		return 2
	}
	// Replacing a node's files is how its certificate is renewed.
	cert, err := pki.CreateNodeFiles(*dir, *nodeID, pki.HostsOf(strings.Split(*addrs, ",")...))
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %s and %s, valid until %s\n", filepath.Join(*dir, *nodeID+".crt"), filepath.Join(*dir, *nodeID+".key"),
		cert.NotAfter.UTC().Format("2006-01-02"))
	return 0
}
