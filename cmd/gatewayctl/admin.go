package main

import (
	"fmt"
	"io"
	"os"
)

// adminFor makes the admin client of a command from its --addr and
// --admin-token (default $GATEWAY_ADMIN_TOKEN, read after parsing so that
// no usage text shows it); on a missing token or a bad address it prints
// why under name and returns nil (exit 2).
func adminFor(name, addr, token string, stderr io.Writer) *adminClient {
	if token == "" {
		token = os.Getenv("GATEWAY_ADMIN_TOKEN")
	}
	if token == "" {
		fmt.Fprintln(stderr, name+": --admin-token or GATEWAY_ADMIN_TOKEN is required")
		return nil
	}
	base, err := memberURL(addr)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return nil
	}
	return &adminClient{base: base, token: token}
}
