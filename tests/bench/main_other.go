// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: sluice's kernel enforcement, and so its benchmark, is Linux only")
	os.Exit(1)
}
