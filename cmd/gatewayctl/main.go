// Command gatewayctl is the operator's CLI for a gateway cluster.
//
// Subcommands register themselves from their own files (cluster.go,
// wallet.go, ...) so each feature keeps its CLI beside nothing else.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(args []string) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		os.Exit(2)
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gatewayctl: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(cmd.run(os.Args[2:]))
}

func usage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: gatewayctl <command> [flags]\n\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(os.Stderr, b.String())
}

// parseFlags parses a subcommand's flags and refuses words left after them.
// Go's flag package stops at the first word that is not a flag, so a stray
// word would otherwise be ignored together with every flag after it
// (`cluster transfer-leadership node3` handed leadership to any node). On
// false the reason and the usage are printed: exit 2.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return false // flag printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (every option is a --flag)\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return false
	}
	return true
}
