// SPDX-License-Identifier: Apache-2.0

//go:build linux

// Command pause is the test image's sandbox and idle container process: it
// waits for SIGTERM or SIGINT and exits 0, as Kubernetes' pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
