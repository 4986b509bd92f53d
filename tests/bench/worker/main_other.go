// SPDX-License-Identifier: Apache-2.0

//go:build !linux

// Command worker is the measured half of sluice's benchmark; it needs
// Linux (see main_linux.go).
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "worker: sluice's benchmark runs on Linux only")
	os.Exit(1)
}
