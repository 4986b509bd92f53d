// SPDX-License-Identifier: Apache-2.0

package namecheck

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
)

// clientHello captures the first flight crypto/tls sends for cfg.
func clientHello(t *testing.T, cfg *tls.Config) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, cfg)
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_ = c.Handshake()
	}()
	buf := make([]byte, 0, MaxFlight)
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, err := b.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if _, ierr := Inspect(buf); ierr == nil || err != nil {
			return buf
		}
	}
}

// echConfigList builds an ECHConfigList (draft-ietf-tls-esni) for an
// X25519 key with public_name.
func echConfigList(t *testing.T, publicName string) []byte {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.PublicKey().Bytes()
	var c []byte
	c = append(c, 7)                             // config_id
	c = binary.BigEndian.AppendUint16(c, 0x0020) // DHKEM(X25519)
	c = binary.BigEndian.AppendUint16(c, uint16(len(pub)))
	c = append(c, pub...)
	c = binary.BigEndian.AppendUint16(c, 4)
	c = binary.BigEndian.AppendUint16(c, 0x0001) // HKDF-SHA256
	c = binary.BigEndian.AppendUint16(c, 0x0001) // AES-128-GCM
	c = append(c, 0)                             // maximum_name_length
	c = append(c, byte(len(publicName)))
	c = append(c, publicName...)
	c = binary.BigEndian.AppendUint16(c, 0) // extensions
	var cfg []byte
	cfg = binary.BigEndian.AppendUint16(cfg, 0xfe0d)
	cfg = binary.BigEndian.AppendUint16(cfg, uint16(len(c)))
	cfg = append(cfg, c...)
	var list []byte
	list = binary.BigEndian.AppendUint16(list, uint16(len(cfg)))
	return append(list, cfg...)
}

func TestInspectTLS(t *testing.T) {
	f, err := Inspect(clientHello(t, &tls.Config{ServerName: "Registry.NPMjs.org", InsecureSkipVerify: true}))
	if err != nil || f.Proto != ProtoTLS || f.Name != "registry.npmjs.org" || f.ECH || f.Problem != "" {
		t.Fatalf("%+v %v", f, err)
	}
	f, err = Inspect(clientHello(t, &tls.Config{InsecureSkipVerify: true}))
	if err != nil || f.Proto != ProtoTLS || f.Name != "" {
		t.Fatalf("no SNI: %+v %v", f, err)
	}
	f, err = Inspect(clientHello(t, &tls.Config{ServerName: "attacker.example", MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: echConfigList(t, "public.example")}))
	if err != nil || !f.ECH || f.Name != "public.example" {
		t.Fatalf("ECH: %+v %v", f, err)
	}
}

func TestInspectTLSFragmented(t *testing.T) {
	hello := clientHello(t, &tls.Config{ServerName: "a.example", InsecureSkipVerify: true})
	// The same handshake cut into records of 100 bytes, and every prefix.
	body := hello[5:]
	var rec []byte
	for len(body) > 0 {
		n := min(100, len(body))
		rec = append(rec, 0x16, 3, 1, byte(n>>8), byte(n))
		rec = append(rec, body[:n]...)
		body = body[n:]
	}
	for i := range rec {
		if _, err := Inspect(rec[:i]); err != ErrIncomplete {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
	if f, err := Inspect(rec); err != nil || f.Name != "a.example" {
		t.Fatalf("%+v %v", f, err)
	}
}

func TestInspectHTTP(t *testing.T) {
	for _, c := range []struct{ req, name, problem string }{
		{"GET / HTTP/1.1\r\nHost: Pypi.org:80\r\nAccept: */*\r\n\r\n", "pypi.org", ""},
		{"GET / HTTP/1.1\r\nhost: a.example\r\nHost: b.example\r\n\r\n", "", "more than one Host header"},
		{"GET / HTTP/1.0\r\n\r\n", "", "an HTTP request without a Host header"},
		{"GET http://b.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", "", "the request target names b.example, the Host header another host"},
		{"GET / HTTP/1.1\r\nHost : a.example\r\n\r\n", "", "white space before the Host header's colon"},
		{"GET / HTTP/1.1\r\nHost: [2001:db8::1]:80\r\n\r\n", "2001:db8::1", ""},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "", "HTTP/2 with prior knowledge (its :authority is HPACK-encoded)"},
	} {
		f, err := Inspect([]byte(c.req))
		if err != nil || f.Name != c.name || f.Problem != c.problem {
			t.Errorf("%q: %+v %v", c.req, f, err)
		}
	}
	if _, err := Inspect([]byte("GET / HTTP/1.1\r\nHost: a")); err != ErrIncomplete {
		t.Errorf("partial head: %v", err)
	}
	if f, _ := Inspect([]byte("SSH-2.0-OpenSSH_9.6\r\n")); f.Proto != ProtoNone {
		t.Errorf("SSH: %+v", f)
	}
}

// TestInspectAny: on a port where other protocols pass, what the kernel's
// check (bpf/sni.c classify_http) takes for HTTP is judged as HTTP, with
// any method and empty lines before it, and what cannot start a request
// line passes.
func TestInspectAny(t *testing.T) {
	long := "GET /" + strings.Repeat("a", HTTPHeadMax) + " HTTP/1.1\r\nHost: evil.example\r\n\r\n"
	for _, c := range []struct {
		b       string
		proto   Proto
		name    string
		problem string
		more    bool
	}{
		{"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "evil.example", "", false},
		{"\r\n\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "evil.example", "", false},
		{"\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "", "an empty line before the request line that is not a CRLF", false},
		{"PROPFIND / HTTP/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "evil.example", "", false},
		{"FOO-bar_1 /x http/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "", "a malformed HTTP request line", false},
		{"GET\t/ HTTP/1.1\r\nHost: evil.example\r\n\r\n", ProtoHTTP, "evil.example", "", false},
		{"CONNECT evil.example:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", ProtoHTTP, "", "a request target that is not origin-form, absolute-form or *", false},
		{long, ProtoHTTP, "", "the HTTP request line is not ended within 4096 bytes", false},
		{"SSH-2.0-OpenSSH_9.6p1 Debian-3\r\n", ProtoOther, "", "", false},
		{"SSH-2.0-OpenSSH_9.6\r\n", ProtoOther, "", "", false},
		{"EHLO client.example\r\n", ProtoOther, "", "", false},
		{"*1\r\n$4\r\nPING\r\n", ProtoOther, "", "", false},
		{"\x00\x00\x00\x08\x04\xd2\x16\x2f", ProtoOther, "", "", false},
		{"0032git-upload-pack /project.git\x00host=evil.example\x00", ProtoOther, "", "", false},
		{"GET / HT", "", "", "", true},
		{"\r\n", "", "", "", true},
		{"GET", "", "", "", true},
	} {
		f, err := InspectAny([]byte(c.b))
		if c.more {
			if err != ErrIncomplete {
				t.Errorf("%q: %+v %v, want more", c.b, f, err)
			}
			continue
		}
		if err != nil || f.Proto != c.proto || f.Name != c.name || f.Problem != c.problem {
			t.Errorf("%q: %+v %v", c.b, f, err)
		}
		// A strict port takes the same flight for the same protocol, and
		// refuses the others.
		sf, _ := Inspect([]byte(c.b))
		if c.proto == ProtoOther && (sf.Proto != ProtoNone || sf.Problem == "") {
			t.Errorf("%q strict: %+v", c.b, sf)
		}
	}
	if why := Judge(nil, Flight{Proto: ProtoOther}); why != "" {
		t.Errorf("another protocol judged: %q", why)
	}
}

func FuzzInspect(f *testing.F) {
	f.Add([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = Inspect(b); _, _ = InspectAny(b) })
}
