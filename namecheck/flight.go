// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// MaxFlight bounds the bytes read before judging: a ClientHello with
// post-quantum key shares is under 2 KiB, a TLS record at most 16 KiB, and
// HTTP request heads beyond 16 KiB are refused by most servers anyway.
const MaxFlight = 16*1024 + 5

// ErrIncomplete says the first flight so far is a prefix of something
// Inspect can judge: read more.
var ErrIncomplete = errors.New("incomplete")

// Proto is what the first flight was.
type Proto string

// The protocols the verifier reads a name from.
const (
	ProtoTLS  Proto = "TLS SNI"
	ProtoHTTP Proto = "HTTP Host"
	ProtoNone Proto = "no host name"
	// ProtoOther: neither TLS nor HTTP, on a port where that passes
	// (InspectAny).
	ProtoOther Proto = "another protocol"
)

// Flight is what a connection's first bytes say.
type Flight struct {
	Proto Proto
	// Name is the SNI or Host, lower case, without a port; "" when the
	// bytes carry none.
	Name string
	// ECH: the ClientHello carries an encrypted_client_hello extension.
	ECH bool
	// Problem says why no name could be read, for the refusal line.
	Problem string
}

// Inspect reads the first flight b of a connection that must carry a
// name (ports 80 and 443, every port of an entry with "verify": "name"):
// a TLS ClientHello or an HTTP/1 request head; anything else is a
// Problem. It returns ErrIncomplete while b is a proper prefix of either.
func Inspect(b []byte) (Flight, error) {
	f, err := InspectAny(b)
	if err == nil && f.Proto == ProtoOther {
		return Flight{Proto: ProtoNone, Problem: "the first bytes are neither a TLS ClientHello nor an HTTP/1 request"}, nil
	}
	return f, err
}

// InspectAny reads the first flight b of a connection on any other port
// of a learned address: a TLS ClientHello and an HTTP/1 request head are
// read as Inspect reads them, and bytes that can be neither (SSH's
// banner, a database's protocol) are ProtoOther, which Judge lets pass.
// It is the kernel's rule (bpf/sni.c), so that the proxy's tunnels and
// the datapath agree.
func InspectAny(b []byte) (Flight, error) {
	if len(b) == 0 {
		return Flight{}, ErrIncomplete
	}
	if b[0] == 0x16 {
		return inspectTLS(b)
	}
	switch classifyHTTP(b) {
	case flightHTTP:
		return inspectHTTP(b)
	case flightLong:
		return Flight{Proto: ProtoHTTP, Problem: fmt.Sprintf("the HTTP request line is not ended within %d bytes", HTTPHeadMax)}, nil
	case flightOther:
		return Flight{Proto: ProtoOther}, nil
	}
	return Flight{}, ErrIncomplete
}

// HTTPHeadMax is how far the kernel's check reads for a request line's
// and head's end (bpf/sni.c HTTP_HEAD_MAX).
const HTTPHeadMax = 4096

type flightClass int

const (
	flightMore flightClass = iota
	flightHTTP
	flightOther
	flightLong
)

// classifyHTTP tells whether b (not TLS) may be an HTTP/1 request head,
// as bpf/sni.c's classify_http does: a server reads a request as empty
// lines it skips, a method (a token), white space, a target, white space
// and "HTTP/" in any case; bytes whose first line has a token, white space
// and "HTTP/" before its line feed are HTTP, such a line not ended within
// HTTPHeadMax bytes is refused (flightLong), and bytes that cannot start a
// request line (no token first, a token not followed by white space, a
// NUL or a line ended without "HTTP/") are another protocol.
func classifyHTTP(b []byte) flightClass {
	n := min(len(b), HTTPHeadMax)
	phase := 0
	for i := 0; i < n; i++ {
		c := b[i]
		switch phase {
		case 0:
			if c == '\r' || c == '\n' {
				continue
			}
			if !tchar(c) {
				return flightOther
			}
			phase = 1
		case 1:
			if tchar(c) {
				continue
			}
			if c != ' ' && c != '\t' {
				return flightOther
			}
			phase = 2
		default:
			if c == '\n' || c == 0 {
				return flightOther
			}
			if i+5 <= n && strings.EqualFold(string(b[i:i+4]), "http") && b[i+4] == '/' {
				return flightHTTP
			}
		}
	}
	if len(b) >= HTTPHeadMax {
		if phase == 1 {
			return flightOther
		}
		return flightLong
	}
	return flightMore
}

// tchar: a byte of an HTTP token (RFC 9110 5.6.2).
func tchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// inspectTLS parses the ClientHello of a TLS handshake that may span
// several records.
func inspectTLS(b []byte) (Flight, error) {
	f := Flight{Proto: ProtoTLS}
	var hs []byte
	for len(b) > 0 {
		if len(b) < 5 {
			return f, ErrIncomplete
		}
		if b[0] != 0x16 {
			f.Problem = "a TLS record other than a handshake before the ClientHello ended"
			return f, nil
		}
		n := int(binary.BigEndian.Uint16(b[3:5]))
		if n == 0 || n > 16384+2048 {
			f.Problem = "a malformed TLS record"
			return f, nil
		}
		if len(b) < 5+n {
			hs = append(hs, b[5:]...)
			b = nil
			break
		}
		hs = append(hs, b[5:5+n]...)
		b = b[5+n:]
		if len(hs) >= 4 && len(hs) >= 4+int(hs[1])<<16|int(hs[2])<<8|int(hs[3]) {
			break
		}
	}
	if len(hs) < 4 {
		return f, ErrIncomplete
	}
	if hs[0] != 1 {
		f.Problem = "the first handshake message is not a ClientHello"
		return f, nil
	}
	n := int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])
	if n > MaxFlight {
		f.Problem = "the ClientHello is too long"
		return f, nil
	}
	if len(hs) < 4+n {
		return f, ErrIncomplete
	}
	if err := parseHello(hs[4:4+n], &f); err != nil {
		f.Problem = "a malformed ClientHello: " + err.Error()
	}
	return f, nil
}

// reader is a bounds-checked cursor over a ClientHello.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) skip(n int) {
	if r.bad || n > len(r.b) {
		r.bad = true
		return
	}
	r.b = r.b[n:]
}

func (r *reader) u8() int {
	if r.bad || len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := int(r.b[0])
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() int {
	if r.bad || len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := int(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

const (
	extServerName = 0
	extECH        = 0xfe0d
)

// parseHello reads the SNI and the ECH extension of a ClientHello body.
func parseHello(body []byte, f *Flight) error {
	r := &reader{b: body}
	r.skip(2 + 32)  // version, random
	r.skip(r.u8())  // session id
	r.skip(r.u16()) // cipher suites
	r.skip(r.u8())  // compression methods
	if r.bad {
		return errors.New("truncated before its extensions")
	}
	if len(r.b) == 0 {
		return nil // no extensions: no SNI
	}
	exts := &reader{b: r.bytes(r.u16())}
	if r.bad {
		return errors.New("truncated extensions")
	}
	seenSNI := false
	for len(exts.b) > 0 && !exts.bad {
		typ := exts.u16()
		data := exts.bytes(exts.u16())
		if exts.bad {
			return errors.New("a truncated extension")
		}
		switch typ {
		case extECH:
			f.ECH = true
		case extServerName:
			if seenSNI {
				return errors.New("two server_name extensions")
			}
			seenSNI = true
			name, err := parseSNI(data)
			if err != nil {
				return err
			}
			f.Name = name
		}
	}
	return nil
}

// parseSNI reads the host_name of a server_name extension; a list with
// more than one host_name is refused, since servers differ in which one
// they route by.
func parseSNI(data []byte) (string, error) {
	r := &reader{b: data}
	list := &reader{b: r.bytes(r.u16())}
	name := ""
	for len(list.b) > 0 && !list.bad {
		typ := list.u8()
		v := list.bytes(list.u16())
		if list.bad {
			break
		}
		if typ != 0 {
			continue
		}
		if name != "" {
			return "", errors.New("two host names in server_name")
		}
		name = string(v)
		if name == "" {
			return "", errors.New("an empty host name in server_name")
		}
	}
	if r.bad || list.bad {
		return "", errors.New("a truncated server_name")
	}
	return strings.ToLower(name), nil
}

// inspectHTTP reads the Host of an HTTP/1 request head.
func inspectHTTP(b []byte) (Flight, error) {
	f := Flight{Proto: ProtoHTTP}
	// Empty lines before the request line, which servers skip: each a
	// CRLF, as the kernel's check takes them.
	for bytes.HasPrefix(b, []byte("\r\n")) {
		b = b[2:]
	}
	if len(b) > 0 && (b[0] == '\r' || b[0] == '\n') {
		f.Problem = "an empty line before the request line that is not a CRLF"
		return f, nil
	}
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b) >= MaxFlight {
			f.Problem = "the HTTP request head is too long"
			return f, nil
		}
		return f, ErrIncomplete
	}
	lines := strings.Split(string(b[:end]), "\r\n")
	req := strings.Fields(lines[0])
	if len(req) != 3 || !strings.HasPrefix(req[2], "HTTP/1.") {
		if len(req) == 3 && req[0] == "PRI" {
			f.Problem = "HTTP/2 with prior knowledge (its :authority is HPACK-encoded)"
		} else {
			f.Problem = "a malformed HTTP request line"
		}
		return f, nil
	}
	// An authority-form target (CONNECT) names its own host, which the
	// kernel's check does not compare: refused as there.
	if t := req[1]; !strings.HasPrefix(t, "/") && t != "*" && !strings.Contains(t, "://") {
		f.Problem = "a request target that is not origin-form, absolute-form or *"
		return f, nil
	}
	hosts := 0
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			f.Problem = "a malformed HTTP header line"
			return f, nil
		}
		if strings.EqualFold(strings.TrimRight(k, " \t"), "host") {
			if k != strings.TrimRight(k, " \t") {
				f.Problem = "white space before the Host header's colon"
				return f, nil
			}
			hosts++
			f.Name = hostOnly(strings.TrimSpace(v))
		}
	}
	if hosts > 1 {
		f.Name = ""
		f.Problem = "more than one Host header"
		return f, nil
	}
	// An absolute-form target wins over Host at many servers (RFC 9112
	// 3.2.2): it must name the same host.
	if t := req[1]; strings.Contains(t, "://") {
		_, rest, _ := strings.Cut(t, "://")
		auth, _, _ := strings.Cut(rest, "/")
		if _, a, ok := strings.Cut(auth, "@"); ok {
			auth = a
		}
		if h := hostOnly(auth); h != f.Name {
			f.Name = ""
			f.Problem = fmt.Sprintf("the request target names %s, the Host header another host", h)
			return f, nil
		}
	}
	if f.Name == "" && hosts == 0 {
		f.Problem = "an HTTP request without a Host header"
	}
	return f, nil
}

// hostOnly strips a port and IPv6 brackets and lowers the case.
func hostOnly(h string) string {
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().String()
	}
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return strings.ToLower(h[1:i])
		}
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.Contains(h[:i], ":") {
		h = h[:i]
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}
