package main

import (
	"fmt"
	"runtime/debug"
)

func init() {
	register("version", "print the build's module version", func([]string) int {
		if bi, ok := debug.ReadBuildInfo(); ok {
			fmt.Println(bi.Main.Path, bi.Main.Version, bi.GoVersion)
		}
		return 0
	})
}
