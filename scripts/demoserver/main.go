// SPDX-License-Identifier: Apache-2.0

// Command demoserver is the fake internet of scripts/demo.sh: a tiny HTTP
// server that listens on every address given on its command line and
// answers each request with one line naming the address that was reached.
// It logs every connection it accepts, so the demo can show what the world
// saw and not only what the client was told.
//
// It exists because the demo must work on a fresh machine with nothing but
// Go, iproute2 and util-linux: python3, nc and busybox are not guaranteed.
//
// Usage:
//
//	demoserver [-ready FILE] ADDR:PORT...
//
// Once every listener is bound it writes "ready" to FILE (if given), so the
// caller can wait for that instead of sleeping.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ready := flag.String("ready", "", "write \"ready\" to this file once listening")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: demoserver [-ready FILE] ADDR:PORT...")
		os.Exit(2)
	}
	log.SetFlags(log.Ltime)
	log.SetPrefix("world: ")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var servers []*http.Server
	for _, addr := range flag.Args() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			log.Fatalf("listen on %s: %v", addr, err)
		}
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "hello from %s\n", addr)
			}),
			// Logged at accept time, so that a connection that never sends
			// a request is recorded too.
			ConnState: func(c net.Conn, s http.ConnState) {
				if s == http.StateNew {
					log.Printf("connection from %s to %s", c.RemoteAddr(), c.LocalAddr())
				}
			},
			ReadHeaderTimeout: 5 * time.Second,
		}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Fatalf("serve %s: %v", addr, err)
			}
		}()
	}
	if *ready != "" {
		if err := os.WriteFile(*ready, []byte("ready\n"), 0o644); err != nil {
			log.Fatalf("write %s: %v", *ready, err)
		}
	}
	<-ctx.Done()
	for _, srv := range servers {
		srv.Close()
	}
}
