// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The broker's servers for the engine (the registry proxy, the build's
// fetch proxy) listen on 127.0.0.1, where the engine speaks plain HTTP,
// and make every upstream request themselves through a client whose
// every connection and redirect they judge.

// loopbackServer is one of them: started on first use, once, and closed
// with the broker.
type loopbackServer struct {
	what    string // names it in errors ("the pull proxy")
	handler http.HandlerFunc

	once sync.Once
	addr string // 127.0.0.1:PORT
	err  error
	mu   sync.Mutex
	srv  *http.Server
}

// start listens on loopback, once; its address.
func (l *loopbackServer) start() (string, error) {
	l.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			l.err = fmt.Errorf("%s: %w", l.what, err)
			return
		}
		l.addr = ln.Addr().String()
		srv := &http.Server{Handler: l.handler, ReadHeaderTimeout: 30 * time.Second}
		l.mu.Lock()
		l.srv = srv
		l.mu.Unlock()
		go func() { _ = srv.Serve(ln) }()
	})
	return l.addr, l.err
}

// close stops the listener and its connections; a start after it fails.
func (l *loopbackServer) close() {
	l.once.Do(func() { l.err = errors.New("the session's broker is closed") })
	l.mu.Lock()
	srv := l.srv
	l.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// judgedClient is an HTTP client whose connections dial makes (and
// judges) and whose redirects checkRedirect judges.
func judgedClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), checkRedirect func(*http.Request, []*http.Request) error, compress bool) *http.Client {
	tr := &http.Transport{
		// Never a proxy from the environment: the connection judged is
		// the connection made.
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
		IdleConnTimeout:       30 * time.Second,
		DisableCompression:    !compress,
	}
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect}
}

// reportOnce tells the broker's OnRefuse of rf, unless seen (guarded by
// mu) already has its reason: a refusal is reported once per pull, push
// or build, however many of the engine's requests it fails.
func (b *Broker) reportOnce(mu *sync.Mutex, seen map[string]bool, rf *Refusal) {
	mu.Lock()
	was := seen[rf.Why]
	seen[rf.Why] = true
	mu.Unlock()
	if !was && b.cfg.OnRefuse != nil {
		b.cfg.OnRefuse(rf)
	}
}
