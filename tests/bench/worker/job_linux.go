// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"
)

// jobLoad is -op curl and -op goclient: the realistic jobs of the
// benchmark, which do what a user's job does for each request (a name
// lookup through the system's resolver, as resolv.conf names it, and a new
// TCP connection), so that the DNS path's cost shows as the user feels it.
type jobLoad struct {
	requests int
	names    int
	prefix   string
	zone     string
}

func (j *jobLoad) flags() {
	flag.IntVar(&j.requests, "requests", 100, "-op curl|goclient: requests in the job")
	flag.IntVar(&j.names, "names-n", 10, "-op curl|goclient: distinct host names the requests go to, in turn")
	flag.StringVar(&j.prefix, "prefix", "job", "-op curl|goclient: first label's prefix of the host names (a new one per run keeps a cache from carrying over)")
	flag.StringVar(&j.zone, "zone", "bench.test", "-op curl|goclient: the zone of the host names")
}

// url is request i's URL.
func (j *jobLoad) url(i int) string {
	return fmt.Sprintf("http://%s-%d.%s/", j.prefix, i%j.names, j.zone)
}

// run runs the job and prints its wall time in nanoseconds.
func (j *jobLoad) run(op string) error {
	if j.requests < 1 || j.names < 1 || j.names > j.requests {
		return errors.New("-op curl|goclient: want 1 ≤ -names-n ≤ -requests")
	}
	var do func(i int) error
	switch op {
	case "curl":
		curl, err := exec.LookPath("curl")
		if err != nil {
			return fmt.Errorf("-op curl: %w", err)
		}
		do = func(i int) error {
			// A new process each: glibc's resolver asks A and AAAA
			// (in parallel, on one socket) and curl connects.
			cmd := exec.Command(curl, "-sS", "-o", "/dev/null", "--max-time", "10", j.url(i))
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("curl %s: %w", j.url(i), err)
			}
			return nil
		}
	case "goclient":
		// The Go resolver (it reads resolv.conf), a new connection per
		// request: no keep-alive, no cache of the client's own.
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext:       (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		}}
		do = func(i int) error {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, j.url(i), nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("GET %s: %s", j.url(i), resp.Status)
			}
			return err
		}
	default:
		return fmt.Errorf("unknown job %q", op)
	}
	start := time.Now()
	for i := range j.requests {
		if err := do(i); err != nil {
			return err
		}
	}
	fmt.Println(time.Since(start).Nanoseconds())
	return nil
}
