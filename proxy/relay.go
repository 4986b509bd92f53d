// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// tunnel relays between the client and up until both directions are done.
// Bytes the client sent after its request (pipelined before the reply) sit
// in the client's reader: they belong to the tunnel and go to up first,
// unparsed. Then the reader is released and the raw connections are copied,
// so that two *net.TCPConn meet in io.Copy and Linux splices.
func (p *Proxy) tunnel(cc *clientConn, up net.Conn, down *downCopy) {
	if n := cc.br.Buffered(); n > 0 {
		b, _ := cc.br.Peek(n)
		_ = up.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
		if _, err := up.Write(b); err != nil {
			return
		}
		_ = up.SetWriteDeadline(time.Time{})
		p.stats.up.Add(uint64(n))
	}
	cc.releaseReader()
	_ = cc.SetDeadline(time.Time{})
	p.relay(cc.Conn, up, down)
}

// downCopy is the copy of up to the client, started before the client's
// direction (startDown) where the client's first flight is judged while
// the server may speak first.
type downCopy struct {
	ended *atomic.Bool // set by the direction that ends first
	done  chan struct{}
}

// startDown starts copying up to client.
func (p *Proxy) startDown(client, up net.Conn) *downCopy {
	d := &downCopy{ended: new(atomic.Bool), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		n, err := io.Copy(client, up)
		p.stats.down.Add(uint64(n))
		endDirection(client, up, err, d.ended.Swap(true))
	}()
	return d
}

// relay copies both ways between client and up and returns when both
// directions have ended; down is the copy of up to the client when it
// was started already (nil: relay starts it). A clean end of one
// direction is passed on as a half-close (FIN), so that protocols that
// read to EOF before answering still work; an error in either direction
// closes both connections. The direction that ends last closes both
// instead of half-closing: the FIN goes out all the same, without a
// shutdown call that the close would repeat.
func (p *Proxy) relay(client, up net.Conn, down *downCopy) {
	if down == nil {
		down = p.startDown(client, up)
	}
	n, err := io.Copy(up, client)
	p.stats.up.Add(uint64(n))
	endDirection(up, client, err, down.ended.Swap(true))
	<-down.done
}

// endDirection passes on the end of src→dst: a FIN to dst after a clean
// EOF, or, after an error (or when dst cannot half-close), the end of both
// connections, which also stops the copy in the other direction. last says
// that the other direction has ended already, so nothing is left to keep
// open.
func endDirection(dst, src net.Conn, err error, last bool) {
	if err == nil && !last {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}

// lingerDrain is how long a refused client is given to read the reply and
// close: closing a socket with unread input sends a RST, which can destroy
// the reply before the client reads it (net/http waits likewise).
const lingerDrain = 500 * time.Millisecond

// closeAfterReply half-closes c and discards what the client still sends,
// briefly and boundedly, before the caller closes it.
func closeAfterReply(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() != nil {
			return
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(lingerDrain))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 256<<10))
}
