// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// nameLoad is -op tls, -op bulk, -op tlsbulk and -op conn: the name
// verification part of the benchmark (issue 18). tls and conn print every
// connection's time in ns, space separated; bulk (HTTP) and tlsbulk
// print the bytes per second of one stream.
type nameLoad struct {
	sni   string
	count int
}

func (l *nameLoad) flags() {
	flag.StringVar(&l.sni, "sni", "", "-op tls|tlsbulk: the SNI; -op bulk: the Host")
	flag.IntVar(&l.count, "conns", 200, "-op tls|conn: connections to time")
}

// run runs op against addr (ADDR:PORT).
func (l *nameLoad) run(op, addr string) error {
	if l.count < 1 {
		return errors.New("-conns must be positive")
	}
	switch op {
	case "tls", "conn":
		times := make([]string, 0, l.count)
		for i := range l.count + 10 {
			start := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return fmt.Errorf("connect %s: %w", addr, err)
			}
			if op == "tls" {
				tc := tls.Client(c, &tls.Config{ServerName: l.sni, InsecureSkipVerify: true})
				if err := tc.Handshake(); err != nil {
					c.Close()
					return fmt.Errorf("handshake with %s (SNI %s): %w", addr, l.sni, err)
				}
			}
			d := time.Since(start)
			c.Close()
			if i >= 10 { // the first ten warm up
				times = append(times, fmt.Sprint(d.Nanoseconds()))
			}
		}
		fmt.Println(strings.Join(times, " "))
		return nil
	case "tlsbulk":
		// A download over TLS, as a package manager's: the handshake,
		// then the server's stream, decrypted and discarded.
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("connect %s: %w", addr, err)
		}
		defer c.Close()
		start := time.Now()
		tc := tls.Client(c, &tls.Config{ServerName: l.sni, InsecureSkipVerify: true})
		if _, err := io.WriteString(tc, "bulk\n"); err != nil {
			return fmt.Errorf("handshake with %s (SNI %s): %w", addr, l.sni, err)
		}
		n, err := io.Copy(io.Discard, tc)
		if err != nil {
			return fmt.Errorf("read the stream: %w", err)
		}
		fmt.Println(float64(n) / time.Since(start).Seconds())
		return nil
	case "bulk":
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return fmt.Errorf("connect %s: %w", addr, err)
		}
		defer c.Close()
		start := time.Now()
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", l.sni); err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return fmt.Errorf("read the stream: %w", err)
		}
		fmt.Println(float64(n) / time.Since(start).Seconds())
		return nil
	}
	return fmt.Errorf("unknown -op %q", op)
}
