package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

// gatewayctl operators add|list|disable: the back office's operators
// (docs/back-office.md). A password is read from standard input (its
// first line), or typed at a prompt with echo off: never an argument,
// which ps and shell history would show.

func init() {
	register("operators", "back-office operators: add, list, disable (admin API)", func(args []string) int {
		return operatorsCmd(args, os.Stdin, os.Stdout, os.Stderr)
	})
}

const operatorsUsage = `usage:
  gatewayctl operators add     --email E --role support|finance|admin [--json] [--addr A] [--admin-token T]
  gatewayctl operators list    [--json] [--addr A] [--admin-token T]
  gatewayctl operators disable --email E [--json] [--addr A] [--admin-token T]

add reads the password from standard input (the first line), or asks for it
twice with echo off when standard input is a terminal:
  read -rs PASSWORD; echo "$PASSWORD" | gatewayctl operators add --email ann@example.com --role support
(echo is the shell's own: the password is never an argument of a process).
At least 12 characters. disable ends the operator's sessions at once; the
record stays, and the email cannot be added again.
`

// operatorRow is an operator as the admin API shows it.
type operatorRow struct {
	Email      string `json:"email"`
	Role       string `json:"role"`
	CreatedAt  string `json:"created_at"`
	Disabled   bool   `json:"disabled"`
	DisabledAt string `json:"disabled_at,omitempty"`
}

func operatorsCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "list" && args[0] != "disable") {
		fmt.Fprint(stderr, operatorsUsage)
		return 2
	}
	sub, args := args[0], args[1:]
	name := "operators " + sub
	fs := flag.NewFlagSet("gatewayctl "+name, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(stderr, operatorsUsage) }
	af := newAdminFlags(fs)
	email := fs.String("email", "", "the operator's email")
	role := fs.String("role", "", "support, finance or admin")
	if !parseFlags(fs, args, stderr) {
		return 2
	}
	if sub != "list" && *email == "" {
		fmt.Fprintf(stderr, "gatewayctl %s: --email is required\n", name)
		return 2
	}
	if sub == "add" && *role == "" {
		fmt.Fprintf(stderr, "gatewayctl %s: --role support|finance|admin is required\n", name)
		return 2
	}
	c, ok := af.client(name, stderr)
	if !ok {
		return 2
	}
	var data []byte
	var err error
	switch sub {
	case "add":
		var password string
		if password, err = readPassword(stdin, stderr); err == nil {
			data, err = c.do("POST", "/admin/v1/operators", map[string]string{"email": *email, "role": *role, "password": password})
		}
	case "list":
		data, err = c.do("GET", "/admin/v1/operators", nil)
	case "disable":
		data, err = c.do("POST", "/admin/v1/operators/"+url.PathEscape(*email)+"/disable", nil)
	}
	rows, code, done := answerRows[operatorRow](af, name, data, err, listKey(sub == "list", "operators"), stdout, stderr)
	if done {
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tROLE\tCREATED\tDISABLED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Email, r.Role, r.CreatedAt, dash(r.DisabledAt))
	}
	tw.Flush()
	return 0
}

// readPassword reads a password: typed twice with echo off when stdin is
// a terminal, else the first line of stdin (without its line ending).
func readPassword(stdin io.Reader, stderr io.Writer) (string, error) {
	if f, ok := stdin.(*os.File); ok {
		if restore, ok := noEcho(f); ok {
			defer restore()
			// Interrupted at the prompt, the terminal gets its echo back.
			interrupted := make(chan os.Signal, 1)
			signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
			defer func() { signal.Stop(interrupted); close(interrupted) }()
			go func() {
				if _, ok := <-interrupted; ok {
					restore()
					fmt.Fprintln(stderr)
					os.Exit(130)
				}
			}()
			r := bufio.NewReader(f)
			fmt.Fprint(stderr, "password: ")
			first, err := readLine(r)
			fmt.Fprint(stderr, "\nagain: ")
			if err == nil {
				var second string
				second, err = readLine(r)
				if err == nil && second != first {
					err = errors.New("the two passwords differ")
				}
			}
			fmt.Fprintln(stderr)
			return first, err
		}
	}
	pw, err := readLine(bufio.NewReader(stdin))
	if err == nil && pw == "" {
		err = errors.New("no password on standard input (its first line)")
	}
	return pw, err
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err == io.EOF && line != "" {
		err = nil
	}
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// printJSON prints an answer indented.
// The API's bytes are kept (members in their order, numbers as written):
// only whitespace is added.
func printJSON(w io.Writer, data []byte) {
	var buf bytes.Buffer
	if json.Indent(&buf, data, "", "  ") == nil {
		data = buf.Bytes()
	}
	fmt.Fprintln(w, string(data))
}

// answerRows ends a command whose call failed (the error, exit 1) or that
// prints the API's JSON (--json, exit 0): done. Else it decodes the answer
// as table rows: the array under key of a listing, or (key "") the one
// object another call answers.
func answerRows[T any](f adminFlags, name string, data []byte, err error, key string, stdout, stderr io.Writer) (rows []T, code int, done bool) {
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "gatewayctl %s: %v\n", name, err)
		return nil, 1, true
	case *f.asJSON:
		printJSON(stdout, data)
		return nil, 0, true
	case key == "":
		var one T
		err = json.Unmarshal(data, &one)
		rows = []T{one}
	default:
		var page map[string][]T
		err = json.Unmarshal(data, &page)
		rows = page[key]
	}
	if err != nil {
		fmt.Fprintf(stderr, "gatewayctl %s: the answer: %v\n", name, err)
		return nil, 1, true
	}
	return rows, 0, false
}

// listKey is the key of a listing's rows, or "" for another call's one
// object.
func listKey(list bool, key string) string {
	if list {
		return key
	}
	return ""
}
