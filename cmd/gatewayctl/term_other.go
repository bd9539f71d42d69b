//go:build !linux

package main

import "os"

// noEcho is not available here: the password must come through a pipe.
func noEcho(*os.File) (func(), bool) { return nil, false }
