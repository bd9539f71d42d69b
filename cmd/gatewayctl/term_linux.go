package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// noEcho turns the terminal's echo off while a password is typed, if f is
// a terminal; restore puts it back. ok is false when f is not a terminal.
func noEcho(f *os.File) (restore func(), ok bool) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, false
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, false
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, true
}
