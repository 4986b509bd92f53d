// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// head is a parsed HTTP/1.x request head.
type head struct {
	method, target string
	minor          int // HTTP/1.minor
	header         http.Header
}

// maxLeadingEmptyLines: RFC 9112 section 2.2 asks servers to ignore at
// least one empty line before a request line (some clients send a CRLF
// after a body); a few, not a stream of them.
const maxLeadingEmptyLines = 4

// readHead reads one request head. Errors are either I/O errors (timeout,
// EOF, errHeadTooLarge) or *failure for syntax. The head is parsed here
// rather than by http.ReadRequest because that drops the Host header of an
// absolute-form request, which the proxy must compare with the target.
func readHead(br *bufio.Reader) (*head, error) {
	tp := textproto.NewReader(br)
	var line string
	for i := 0; ; i++ {
		l, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		if l != "" {
			line = l
			break
		}
		if i == maxLeadingEmptyLines {
			return nil, malformed("empty lines where a request line should be")
		}
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" || !httpguts.ValidHeaderFieldName(method) {
		return nil, malformed("malformed request line %q: want METHOD TARGET HTTP/1.1", truncate(line, 100))
	}
	h := &head{method: method, target: target}
	switch proto {
	case "HTTP/1.1":
		h.minor = 1
	case "HTTP/1.0":
		h.minor = 0
	default:
		return nil, malformed("unsupported protocol %q in the request line (sluice speaks HTTP/1.0 and HTTP/1.1)", truncate(proto, 40))
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c < 0x21 || c == 0x7f {
			return nil, malformed("request target %q contains a control character", truncate(target, 100))
		}
	}
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		var pe textproto.ProtocolError
		if errors.As(err, &pe) {
			return nil, malformed("malformed header: %v", err)
		}
		return nil, err
	}
	for k := range mh {
		// textproto keeps names with spaces ("Host : x") for
		// compatibility; forwarded, an upstream could read them as Host.
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, malformed("malformed header name %q", truncate(k, 60))
		}
	}
	h.header = http.Header(mh)
	return h, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// keepAlive reports whether the client wants the connection kept after
// this request. HTTP/1.0 keep-alive is not offered: it is rare, and closing
// is always correct.
func (h *head) keepAlive() bool {
	if h.minor == 0 {
		return false
	}
	return !httpguts.HeaderValuesContainsToken(h.header["Connection"], "close") &&
		!httpguts.HeaderValuesContainsToken(h.header["Proxy-Connection"], "close")
}

// hostHeader returns the Host header; more than one is malformed.
func (h *head) hostHeader() (string, bool, *failure) {
	hosts := h.header["Host"]
	switch len(hosts) {
	case 0:
		return "", false, nil
	case 1:
		return hosts[0], true, nil
	}
	return "", false, malformed("%d Host headers: a request names one authority", len(hosts))
}

// serveHTTP reads requests until the connection ends: a CONNECT turns it
// into a tunnel, absolute-form requests are forwarded one at a time, each
// judged on its own.
func (p *Proxy) serveHTTP(cc *clientConn) {
	var bw *bufio.Writer
	for first := true; ; first = false {
		if !first {
			// Wait for the next request without a head deadline; a
			// client that leaves now has simply finished.
			_ = cc.SetReadDeadline(time.Now().Add(p.cfg.IdleTimeout))
			if _, err := cc.br.Peek(1); err != nil {
				return
			}
			_ = cc.SetReadDeadline(time.Now().Add(p.cfg.Timeout))
		}
		cc.lim.limit(maxHeadBytes)
		h, err := readHead(cc.br)
		cc.lim.unlimit()
		if err != nil {
			var f *failure
			switch {
			case errors.As(err, &f):
			case errors.Is(err, errHeadTooLarge):
				f = malformed("request head larger than %d bytes", maxHeadBytes)
				f.status = http.StatusRequestHeaderFieldsTooLarge
			case isTimeout(err):
				f = malformed("no complete request head within %v", p.cfg.Timeout)
				f.status = http.StatusRequestTimeout
			default:
				f = malformed("reading the request: %v", err)
			}
			p.emitFailure(Event{Client: cc.peer}, f)
			p.replyFailure(cc, f, "request")
			return
		}
		if h.method == http.MethodConnect {
			p.serveConnect(cc, h)
			return
		}
		if bw == nil {
			bw = bufio.NewWriter(cc.Conn)
		}
		if !p.forward(cc, bw, h) {
			return
		}
	}
}

// connectTarget checks a CONNECT request: authority-form host:port, a Host
// header (if any) naming the same authority, no body. Anything else could
// make sluice and the client disagree about where the tunnel leads.
func connectTarget(h *head) (target, *failure) {
	if strings.HasPrefix(h.target, "/") || strings.Contains(h.target, "://") {
		return target{}, malformed("CONNECT %s: the target must be host:port (authority form); sluice does not relay to a second target", truncate(h.target, 100))
	}
	t, err := parseAuthority(h.target, 0)
	if err != nil {
		return target{}, malformed("CONNECT %s: %v", truncate(h.target, 100), err)
	}
	host, ok, f := h.hostHeader()
	if f != nil {
		return target{}, f
	}
	if ok && !sameAuthority(host, t, 0) {
		return target{}, malformed("CONNECT %s with Host %q: the Host header names a different authority", t, truncate(host, 100))
	}
	// RFC 9110 section 9.3.6: a CONNECT request has no content. Bytes
	// after the head are tunnel data, so a declared body would be read
	// differently by the client and by sluice.
	if len(h.header["Transfer-Encoding"]) > 0 {
		return target{}, malformed("CONNECT %s with Transfer-Encoding: a CONNECT request has no body", t)
	}
	for _, v := range h.header["Content-Length"] {
		if v != "0" {
			return target{}, malformed("CONNECT %s with Content-Length %q: a CONNECT request has no body", t, truncate(v, 20))
		}
	}
	return t, nil
}

// connectEstablished is the whole reply to an allowed CONNECT.
const connectEstablished = "HTTP/1.1 200 Connection established\r\n\r\n"

func (p *Proxy) serveConnect(cc *clientConn, h *head) {
	ev := Event{Client: cc.peer, Protocol: ProtoConnect}
	t, f := connectTarget(h)
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, "CONNECT")
		return
	}
	ev.Host, ev.Port = t.host, t.port
	what := "CONNECT to " + t.String()
	addrs, f := p.decide(p.ctx, &ev, t)
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, what)
		return
	}
	up, upAddr, f := p.openUpstream(addrs, t.port)
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, what)
		return
	}
	defer p.closeUpstream(up)
	_ = cc.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if _, err := io.WriteString(cc.Conn, connectEstablished); err != nil {
		return
	}
	ok, down := p.checkName(cc, ev, t, up, upAddr)
	if !ok {
		return
	}
	p.stats.connect.allowed.Add(1)
	p.tunnel(cc, up, down)
}

// replyFailure answers a refused or failed HTTP request with a text the
// user can act on and closes the connection: whatever the client sent
// after the refused head (a body, pipelined requests, tunnel data) is
// never read as a request.
func (p *Proxy) replyFailure(cc *clientConn, f *failure, what string) {
	var body string
	switch f.kind {
	case EventRefused:
		body = fmt.Sprintf("sluice: %s refused: %s\n", what, f.reason)
	case EventFailed:
		body = fmt.Sprintf("sluice: %s failed: %s\n", what, f.reason)
	default:
		body = fmt.Sprintf("sluice: bad request: %s\n", f.reason)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", f.status, http.StatusText(f.status))
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	fmt.Fprintf(&b, "Proxy-Status: sluice; error=%s; details=%s\r\n", f.proxyStatus, sfString(f.reason))
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(body)
	_ = cc.SetWriteDeadline(time.Now().Add(p.cfg.Timeout))
	if _, err := io.WriteString(cc.Conn, b.String()); err != nil {
		return
	}
	closeAfterReply(cc.Conn)
}

// sfString quotes s as a structured-field string (RFC 8941): printable
// ASCII only, with '"' and '\' escaped.
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// absoluteTarget checks an absolute-form request (RFC 9112 section 3.2.2)
// and returns its destination, the authority as written and the
// origin-form target to send upstream.
func absoluteTarget(h *head) (t target, authority, path string, f *failure) {
	raw := h.target
	if raw[0] == '/' || raw == "*" {
		return target{}, "", "", malformed("%s %s: an origin-form request to the proxy; sluice is a proxy, not a web server: send an absolute URI (GET http://host/path) or use CONNECT", h.method, truncate(raw, 100))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return target{}, "", "", malformed("%s %s: the request target is neither an absolute http:// URI nor a path", h.method, truncate(raw, 100))
	}
	if !strings.EqualFold(scheme, "http") {
		if strings.EqualFold(scheme, "https") {
			return target{}, "", "", malformed("%s %s: sluice does not originate TLS; use CONNECT for https", h.method, truncate(raw, 100))
		}
		return target{}, "", "", malformed("%s %s: scheme %q is not supported (http only; CONNECT for anything else)", h.method, truncate(raw, 100), truncate(scheme, 20))
	}
	authority, path = rest, "/"
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	switch {
	case strings.IndexByte(path, '#') >= 0:
		return target{}, "", "", malformed("%s %s: a request target has no fragment", h.method, truncate(raw, 100))
	case path[0] == '?':
		path = "/" + path
	case path == "/" && h.method == http.MethodOptions && !strings.ContainsAny(rest, "/?"):
		path = "*" // RFC 9112 section 3.2.4
	}
	t, err := parseAuthority(authority, 80)
	if err != nil {
		return target{}, "", "", malformed("%s %s: %v", h.method, truncate(raw, 100), err)
	}
	host, ok, f := h.hostHeader()
	if f != nil {
		return target{}, "", "", f
	}
	if ok && !sameAuthority(host, t, 80) {
		return target{}, "", "", malformed("%s %s with Host %q: the Host header names a different authority than the request target", h.method, truncate(raw, 100), truncate(host, 100))
	}
	return t, authority, path, nil
}

// hopByHop are header fields that describe one connection, not the
// message (RFC 9110 section 7.6.1), and Proxy-Authorization, which is
// meant for the proxy: none of them is forwarded.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopByHop {
		delete(h, k)
	}
}

// bodyReader reads a request body in the framing the client declared. done
// turns true once the client has sent all of it, before the last bytes
// are passed on: so when the upstream has answered, done tells whether the
// client's side of the connection is at a request boundary.
type bodyReader struct {
	r       io.Reader
	cl      *io.LimitedReader // Content-Length framing
	chunked bool
	cc      *clientConn
	done    atomic.Bool
}

// maxContentLength is far beyond any real request, and keeps the value
// clear of int64 overflow.
const maxContentLength = 1 << 62

// requestBody checks the body framing of a forwarded request (RFC 9112
// section 6). Ambiguous framing is refused, not repaired: a request with
// both Transfer-Encoding and Content-Length, several Content-Length values,
// or a coding other than chunked is how requests are smuggled past a
// proxy. It returns nil for a request without body; hasLength says whether
// a Content-Length (possibly 0) is to be sent.
func requestBody(h *head, cc *clientConn) (b *bodyReader, hasLength bool, f *failure) {
	te, cl := h.header["Transfer-Encoding"], h.header["Content-Length"]
	switch {
	case len(te) > 0 && len(cl) > 0:
		return nil, false, malformed("request with both Transfer-Encoding and Content-Length: ambiguous framing")
	case len(te) > 0:
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return nil, false, malformed("Transfer-Encoding %q: sluice accepts chunked only", truncate(strings.Join(te, ", "), 60))
		}
		if h.minor == 0 {
			return nil, false, malformed("Transfer-Encoding in an HTTP/1.0 request")
		}
		return &bodyReader{r: httputil.NewChunkedReader(cc.br), chunked: true, cc: cc}, false, nil
	case len(cl) > 1:
		return nil, false, malformed("%d Content-Length headers", len(cl))
	case len(cl) == 1:
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil || cl[0][0] == '+' || n > maxContentLength {
			return nil, false, malformed("Content-Length %q is not a length", truncate(cl[0], 30))
		}
		if n == 0 {
			return nil, true, nil
		}
		lr := &io.LimitedReader{R: cc.br, N: int64(n)}
		return &bodyReader{r: lr, cl: lr, cc: cc}, true, nil
	}
	return nil, false, nil
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	switch {
	case b.cl != nil:
		if b.cl.N == 0 {
			b.done.Store(true)
			if err == nil && n == 0 {
				err = io.EOF
			}
		} else if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
	case err == io.EOF:
		// The last chunk: read (and drop) the trailer section, bounded
		// like a head, so the next request starts where it should.
		b.cc.lim.limit(maxHeadBytes)
		_, terr := textproto.NewReader(b.cc.br).ReadMIMEHeader()
		b.cc.lim.unlimit()
		if terr != nil {
			return n, fmt.Errorf("reading the chunked trailer: %w", terr)
		}
		b.done.Store(true)
	}
	return n, err
}

// forward sends one absolute-form request to its destination and the
// response back. Upstream connections are not reused: each request gets
// its own, opened after its own policy decision and closed after the
// response, so no request can ride on a connection another decision
// opened. It reports whether the client connection can carry another
// request.
func (p *Proxy) forward(cc *clientConn, bw *bufio.Writer, h *head) bool {
	ev := Event{Client: cc.peer, Protocol: ProtoHTTP, Method: h.method}
	clientKeepAlive := h.keepAlive() // before the hop-by-hop headers go
	t, authority, path, f := absoluteTarget(h)
	var body *bodyReader
	var hasLength bool
	if f == nil {
		body, hasLength, f = requestBody(h, cc)
	}
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, h.method)
		return false
	}
	ev.Host, ev.Port = t.host, t.port
	what := h.method + " to " + t.String()
	addrs, f := p.decide(p.ctx, &ev, t)
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, what)
		return false
	}
	up, _, f := p.openUpstream(addrs, t.port)
	if f != nil {
		p.emitFailure(ev, f)
		p.replyFailure(cc, f, what)
		return false
	}
	p.stats.http.allowed.Add(1)
	// The body may take as long as the client needs; the wait for it is
	// bounded by the client, as on a direct connection.
	_ = cc.SetReadDeadline(time.Time{})

	var writeDone chan error // set while a goroutine sends the body
	badBody := make(chan *bodyError, 1)
	defer func() {
		// The writer must be finished before the client's reader goes
		// back to the pool: closing up stops its writes, and closing the
		// client stops a body read that would never end.
		p.closeUpstream(up)
		if body != nil && !body.done.Load() {
			cc.Conn.Close()
		}
		if writeDone != nil {
			<-writeDone
		}
	}()

	uw := bufio.NewWriter(up)
	writeRequestHead(uw, h, authority, path, body, hasLength)
	if err := uw.Flush(); err != nil {
		p.upstreamBroken(cc, ev, what, fmt.Errorf("sending the request to %v: %w", up.RemoteAddr(), err))
		return false
	}
	if body != nil {
		// Concurrently with reading the response: the upstream may
		// answer before the body is complete (100 Continue, or an early
		// 413), and waiting for the whole body first would deadlock.
		writeDone = make(chan error, 1)
		go func() {
			err := p.copyBody(uw, body)
			var be *bodyError
			if errors.As(err, &be) {
				// The request cannot be completed, so there is no
				// answer to wait for: say why before ending the wait.
				badBody <- be
				up.Close()
			}
			writeDone <- err
		}()
	}

	resp, err := readResponse(up, h.method, func(interim *http.Response) error {
		// 100 Continue and 103 Early Hints mean nothing to an HTTP/1.0
		// client (RFC 9110 section 15.2).
		if h.minor == 0 {
			return nil
		}
		err := writeResponseHead(bw, interim, noBody, false)
		if err == nil {
			err = bw.Flush()
		}
		return err
	})
	if err != nil {
		select {
		case be := <-badBody:
			f := malformed("%s: %v", what, be)
			p.emitFailure(ev, f)
			p.replyFailure(cc, f, what)
		default:
			p.upstreamBroken(cc, ev, what, err)
		}
		return false
	}
	keep, err := writeResponse(bw, resp, h, clientKeepAlive, &p.stats)
	if err != nil {
		return false
	}
	return keep && (body == nil || body.done.Load())
}

// upstreamBroken answers 502 for an upstream that failed after the dial.
func (p *Proxy) upstreamBroken(cc *clientConn, ev Event, what string, err error) {
	f := &failure{kind: EventFailed, reason: err.Error(), status: http.StatusBadGateway,
		socks: socksGeneralFailure, proxyStatus: "http_response_incomplete"}
	p.emitFailure(ev, f)
	p.replyFailure(cc, f, what)
}

// writeRequestHead writes the request in origin form, with the Host the
// client named, its end-to-end headers and framing sluice chose.
// "Connection: close" because the upstream connection is not reused.
func writeRequestHead(w *bufio.Writer, h *head, authority, path string, body *bodyReader, hasLength bool) {
	hdr := h.header
	removeHopByHop(hdr)
	delete(hdr, "Host")
	delete(hdr, "Content-Length")
	fmt.Fprintf(w, "%s %s HTTP/1.%d\r\nHost: %s\r\n", h.method, path, h.minor, authority)
	_ = hdr.Write(w)
	switch {
	case body != nil && body.chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	case body != nil:
		fmt.Fprintf(w, "Content-Length: %d\r\n", body.cl.N)
	case hasLength:
		w.WriteString("Content-Length: 0\r\n")
	}
	w.WriteString("Connection: close\r\n\r\n")
}

// bodyError is the client's fault while its request body was read: the
// body was malformed or the client went away.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// copyBody sends the request body, flushing as it arrives so that
// streamed uploads stream.
func (p *Proxy) copyBody(w *bufio.Writer, body *bodyReader) error {
	buf := make([]byte, 32<<10)
	var cw io.WriteCloser
	if body.chunked {
		cw = httputil.NewChunkedWriter(w)
	}
	for {
		n, err := body.Read(buf)
		if n > 0 {
			var werr error
			if cw != nil {
				_, werr = cw.Write(buf[:n])
			} else {
				_, werr = w.Write(buf[:n])
			}
			if werr == nil {
				werr = w.Flush()
			}
			if werr != nil {
				return fmt.Errorf("sending the request body: %w", werr)
			}
			p.stats.up.Add(uint64(n))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return &bodyError{err}
		}
	}
	if cw != nil {
		if err := cw.Close(); err != nil {
			return err
		}
		w.WriteString("\r\n") // no trailer section
	}
	return w.Flush()
}

// readResponse reads the final response, passing interim (1xx) responses
// to interim. The response head is bounded like a request head. Headers
// that the upstream's Connection header names are removed:
// http.ReadResponse drops a Connection header that says "close" (as the
// answer to sluice's "Connection: close" does), and with it the names, so
// they are read from a copy of the raw head.
func readResponse(up io.Reader, method string, interim func(*http.Response) error) (*http.Response, error) {
	tee := &headTee{r: up}
	lim := &limitedReader{r: tee}
	br := bufio.NewReader(lim)
	req := &http.Request{Method: method}
	for {
		// A head may already sit in br, read along with the last one.
		buffered, _ := br.Peek(br.Buffered())
		tee.start(buffered)
		lim.limit(maxHeadBytes)
		resp, err := http.ReadResponse(br, req)
		lim.unlimit()
		raw := tee.stop()
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		for _, name := range connectionTokens(raw) {
			resp.Header.Del(name)
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			// Upgrade is hop-by-hop and was not forwarded, so this
			// answers a request that was never made.
			return nil, errors.New("upstream switched protocols without being asked (use CONNECT for WebSocket and other upgrades)")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			if err := interim(resp); err != nil {
				return nil, err
			}
		default:
			return resp, nil
		}
	}
}

// headTee keeps a copy of what is read while a response head is parsed.
type headTee struct {
	r   io.Reader
	on  bool
	buf []byte
}

func (t *headTee) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if t.on {
		t.buf = append(t.buf, b[:n]...)
	}
	return n, err
}

func (t *headTee) start(buffered []byte) {
	t.on = true
	t.buf = append(t.buf[:0], buffered...)
}

func (t *headTee) stop() []byte {
	t.on = false
	return t.buf
}

// connectionTokens returns the field names listed in the Connection
// headers of a raw response head (and whatever followed it).
func connectionTokens(raw []byte) []string {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := tp.ReadLine(); err != nil {
		return nil
	}
	h, _ := tp.ReadMIMEHeader() // parsed already by ReadResponse
	var names []string
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				names = append(names, name)
			}
		}
	}
	return names
}

// framing is how a response body is delimited towards the client.
type framing int

const (
	noBody      framing = iota // HEAD, 1xx, 204, 304
	lengthBody                 // Content-Length
	chunkedBody                // re-chunked for an HTTP/1.1 client
	closeBody                  // delimited by closing (HTTP/1.0 client, unknown length)
)

func responseFraming(resp *http.Response, h *head) framing {
	switch {
	case h.method == http.MethodHead || resp.StatusCode < 200 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		return noBody
	case resp.ContentLength >= 0:
		return lengthBody
	case h.minor == 1:
		return chunkedBody
	}
	return closeBody
}

// writeResponseHead writes the status line, the end-to-end headers and
// the framing sluice chose: Content-Length when known, otherwise chunked
// for HTTP/1.1 clients, otherwise (HTTP/1.0) close-delimited. The
// upstream's own framing headers are not copied: the body is re-framed.
func writeResponseHead(w *bufio.Writer, resp *http.Response, fr framing, closeAfter bool) error {
	removeHopByHop(resp.Header)
	if fr != noBody {
		// For HEAD and 304 the upstream's Content-Length describes the
		// representation, not this message, and passes through.
		resp.Header.Del("Content-Length")
	}
	status := resp.Status
	if status == "" {
		status = strconv.Itoa(resp.StatusCode)
	}
	w.WriteString("HTTP/1.1 " + status + "\r\n")
	if err := resp.Header.Write(w); err != nil {
		return err
	}
	switch fr {
	case lengthBody:
		fmt.Fprintf(w, "Content-Length: %d\r\n", resp.ContentLength)
	case chunkedBody:
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if closeAfter {
		w.WriteString("Connection: close\r\n")
	}
	_, err := w.WriteString("\r\n")
	return err
}

// writeResponse sends the final response to the client and reports
// whether the connection may carry another request.
func writeResponse(w *bufio.Writer, resp *http.Response, h *head, clientKeepAlive bool, st *stats) (keep bool, err error) {
	defer resp.Body.Close()
	fr := responseFraming(resp, h)
	closeAfter := !clientKeepAlive || fr == closeBody
	if err := writeResponseHead(w, resp, fr, closeAfter); err != nil {
		return false, fmt.Errorf("sending the response: %w", err)
	}
	if fr != noBody {
		buf := make([]byte, 32<<10)
		for {
			n, rerr := resp.Body.Read(buf)
			if n > 0 {
				if fr == chunkedBody {
					fmt.Fprintf(w, "%x\r\n", n)
				}
				w.Write(buf[:n])
				if fr == chunkedBody {
					w.WriteString("\r\n")
				}
				// Flush as data arrives: event streams and long polls
				// must not wait for a buffer to fill.
				if err := w.Flush(); err != nil {
					return false, fmt.Errorf("sending the response: %w", err)
				}
				st.down.Add(uint64(n))
			}
			if rerr == io.EOF {
				break
			}
			if rerr != nil {
				// A truncated body can only be signalled by closing.
				return false, fmt.Errorf("reading the response body: %w", rerr)
			}
		}
		if fr == chunkedBody {
			w.WriteString("0\r\n")
			removeHopByHop(resp.Trailer)
			_ = resp.Trailer.Write(w)
			w.WriteString("\r\n")
		}
	}
	if err := w.Flush(); err != nil {
		return false, fmt.Errorf("sending the response: %w", err)
	}
	return !closeAfter, nil
}
