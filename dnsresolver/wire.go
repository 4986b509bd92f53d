// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/miekg/dns"

	"github.com/sluice-dev/sluice/addrclass"
)

// The UDP fast path reads queries and writes cached answers as bytes: on a
// two-CPU machine shared with the program it serves and the upstream,
// unpacking every query into a dns.Msg and packing every reply again cost
// more CPU than the upstream's whole answer. Only the common shape takes
// this path (one question of plain host-name labels, at most an EDNS0 OPT
// record); anything else goes through miekg/dns as before, so the bytes
// here never have to be right about an unusual message.

const (
	headerLen = 12
	// optLen is an OPT record with empty RDATA: root name, type, class
	// (UDP size), TTL (extended rcode, version, flags), RDLENGTH.
	optLen = 11
	// maxQueryName is a name's wire length limit (RFC 1035 2.3.4).
	maxQueryName = 255
)

// wireQuery is a query read straight from its datagram.
type wireQuery struct {
	id       uint16
	rd, cd   bool
	question []byte // name, type and class as asked (letter case kept); a slice of the datagram
	name     string // lower case, without the trailing dot
	qtype    uint16
	qclass   uint16
	edns     bool
	do       bool
	limit    int // largest reply the client takes over UDP
}

// parseQuery reads a query of the common shape: a standard query with one
// question whose labels are letters, digits, '-' or '_', no answer or
// authority records, and at most an EDNS0 (version 0) OPT record without
// options. ok is false for anything else, which then takes the general
// path.
func parseQuery(b []byte) (q wireQuery, ok bool) {
	if len(b) < headerLen+1+4 {
		return q, false
	}
	if b[2]&0xf8 != 0 { // QR set, or an opcode other than QUERY
		return q, false
	}
	qd, an, ns, ar := binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
	if qd != 1 || an != 0 || ns != 0 || ar > 1 {
		return q, false
	}
	q.id = binary.BigEndian.Uint16(b)
	q.rd = b[2]&0x01 != 0
	q.cd = b[3]&0x10 != 0

	var lower [maxQueryName]byte
	n := 0 // bytes of lower used
	off := headerLen
	for {
		if off >= len(b) {
			return q, false
		}
		l := int(b[off])
		off++
		if l == 0 {
			break
		}
		if l > 63 || off+l > len(b) || off-headerLen+l >= maxQueryName {
			return q, false // also rejects compression pointers (0xc0)
		}
		if n > 0 {
			lower[n] = '.'
			n++
		}
		for _, c := range b[off : off+l] {
			switch {
			case c >= 'A' && c <= 'Z':
				c += 'a' - 'A'
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return q, false
			}
			lower[n] = c
			n++
		}
		off += l
	}
	if n == 0 || off+4 > len(b) {
		return q, false // the root, or a cut question
	}
	q.qtype = binary.BigEndian.Uint16(b[off:])
	q.qclass = binary.BigEndian.Uint16(b[off+2:])
	off += 4
	q.question = b[headerLen:off]
	q.name = string(lower[:n])
	q.limit = dns.MinMsgSize
	if ar == 1 {
		if off+optLen > len(b) || b[off] != 0 || binary.BigEndian.Uint16(b[off+1:]) != dns.TypeOPT || b[off+6] != 0 {
			return q, false // not an OPT record, or an EDNS version sluice does not speak
		}
		if binary.BigEndian.Uint16(b[off+9:]) != 0 {
			return q, false // EDNS options: miekg/dns judges them on the general path
		}
		q.edns = true
		q.limit = max(int(binary.BigEndian.Uint16(b[off+3:])), dns.MinMsgSize)
		q.do = b[off+7]&0x80 != 0
		off += optLen
	}
	if off != len(b) {
		return q, false // trailing bytes, or options longer than the datagram
	}
	return q, true
}

// packedAnswer is a filtered answer, packed for the fast path; the general
// path reads it as a message.
type packedAnswer struct {
	wire []byte   // ID 0, without OPT
	qlen int      // length of the question in wire
	ttls []uint16 // offsets of the TTL fields in wire

	once sync.Once
	msg  *dns.Msg // not modified once set: the general path copies it
}

// message is the answer as a message, unpacked the first time the general
// path needs it: most answers only ever travel as bytes.
func (p *packedAnswer) message() *dns.Msg {
	p.once.Do(func() {
		if p.msg != nil {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(p.wire); err != nil {
			// index() parsed it; a failure here is a bug. Answer
			// SERVFAIL rather than crash.
			m = new(dns.Msg)
			m.Rcode = dns.RcodeServerFailure
		}
		p.msg = m
	})
	return p.msg
}

// packAnswer packs m (which it takes over) for the fast path. m's OPT
// record is dropped: the reply carries sluice's own.
func packAnswer(m *dns.Msg) (*packedAnswer, error) {
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if _, ok := rr.(*dns.OPT); !ok {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
	m.Id = 0
	m.Compress = false
	wire, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("pack answer: %w", err)
	}
	p := &packedAnswer{wire: wire}
	p.once.Do(func() { p.msg = m })
	if err := p.index(); err != nil {
		return nil, err
	}
	return p, nil
}

var errBadPacked = errors.New("packed answer does not parse")

// index finds the question's end and every record's TTL in p.wire.
func (p *packedAnswer) index() error {
	b := p.wire
	if len(b) < headerLen || binary.BigEndian.Uint16(b[4:]) != 1 {
		return errBadPacked
	}
	off, ok := skipName(b, headerLen)
	if !ok || off+4 > len(b) {
		return errBadPacked
	}
	off += 4
	p.qlen = off - headerLen
	records := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) + int(binary.BigEndian.Uint16(b[10:]))
	for range records {
		if off, ok = skipName(b, off); !ok || off+10 > len(b) {
			return errBadPacked
		}
		p.ttls = append(p.ttls, uint16(off+4))
		off += 10 + int(binary.BigEndian.Uint16(b[off+8:]))
	}
	if off != len(b) || len(b) > 0xffff {
		return errBadPacked
	}
	return nil
}

// skipName returns the offset after the name at off.
func skipName(b []byte, off int) (int, bool) {
	for off < len(b) {
		l := int(b[off])
		switch {
		case l == 0:
			return off + 1, true
		case l&0xc0 == 0xc0:
			return off + 2, off+2 <= len(b)
		case l&0xc0 != 0:
			return 0, false
		}
		off += 1 + l
	}
	return 0, false
}

// appendReply appends the reply to q built from p, whose TTLs are reduced
// by age seconds. ok is false when the reply would not fit the client's
// limit, or q's question is not p's: the general path (which truncates)
// answers then.
func appendReply(dst []byte, p *packedAnswer, q *wireQuery, age uint32) ([]byte, bool) {
	size := len(p.wire)
	if q.edns {
		size += optLen
	}
	if size > q.limit || p.qlen != len(q.question) {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, p.wire...)
	b := dst[start:]
	binary.BigEndian.PutUint16(b, q.id)
	b[2] = 0x80 | p.wire[2]&0x04 // QR, AA as answered, opcode QUERY, not truncated
	if q.rd {
		b[2] |= 0x01
	}
	b[3] = p.wire[3] | 0x80 // RA
	copy(b[headerLen:], q.question)
	if age > 0 {
		for _, o := range p.ttls {
			ttl := binary.BigEndian.Uint32(b[o:])
			binary.BigEndian.PutUint32(b[o:], ttl-min(ttl, age))
		}
	}
	if q.edns {
		binary.BigEndian.PutUint16(b[10:], binary.BigEndian.Uint16(b[10:])+1)
		dst = appendOPT(dst, q.do)
	}
	return dst, true
}

// appendOPT appends sluice's OPT record.
func appendOPT(dst []byte, do bool) []byte {
	flags := byte(0)
	if do {
		flags = 0x80
	}
	return append(dst, 0, 0, byte(dns.TypeOPT), byte(upstreamUDPSize>>8), byte(upstreamUDPSize&0xff), 0, 0, flags, 0, 0, 0)
}

// appendEmptyReply appends a reply to q with rcode and no records.
func appendEmptyReply(dst []byte, q *wireQuery, rcode int) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, q.id)
	flags := byte(0x80)
	if q.rd {
		flags |= 0x01
	}
	dst = append(dst, flags, 0x80|byte(rcode&0x0f), 0, 1, 0, 0, 0, 0, 0, 0)
	if q.cd {
		dst[start+3] |= 0x10
	}
	dst = append(dst, q.question...)
	if q.edns {
		dst[start+11] = 1
		dst = appendOPT(dst, q.do)
	}
	return dst
}

// appendUpstreamQuery appends the query sluice sends upstream for q: the
// normalised name, q's RD and CD bits, EDNS0 with sluice's buffer size
// and q's DO bit. The ID is set when an upstream socket is chosen.
func appendUpstreamQuery(dst []byte, q *wireQuery) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1)
	if q.rd {
		dst[start+2] = 0x01
	}
	if q.cd {
		dst[start+3] = 0x10
	}
	name := q.name
	for len(name) > 0 {
		i := 0
		for i < len(name) && name[i] != '.' {
			i++
		}
		dst = append(dst, byte(i))
		dst = append(dst, name[:i]...)
		if i < len(name) {
			i++
		}
		name = name[i:]
	}
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, q.qtype)
	dst = binary.BigEndian.AppendUint16(dst, q.qclass)
	return appendOPT(dst, q.do)
}

// maxWireAnswers bounds the records acceptWire takes: longer answers are
// rare and go through the general path.
const maxWireAnswers = 16

// acceptWire is FilterAnswer for the commonest answer, read and rewritten
// as bytes: NOERROR, the question sluice asked (q's name, type A or AAAA,
// class IN), 1 to maxWireAnswers records of that type owned by the asked
// name (written as the question's name or a pointer to it), nothing in the
// authority section and at most an OPT record in the additional one. Such
// an answer keeps every record through FilterAnswer unless an address is a
// rebinding one (unless allowPrivate), and then ok is false: the general
// path drops it and says so. TTLs are clamped to maxTTL in the copy it
// returns (ID 0, OPT removed), with the addresses to learn and the
// smallest TTL. ok false means nothing was decided: use the general path.
func acceptWire(b []byte, q *wireQuery, maxTTL uint32, allowPrivate bool) (ans *packedAnswer, learn []Learned, minTTL uint32, ok bool) {
	if len(b) < headerLen || b[2]&0xfa != 0x80 || b[3]&0x0f != dns.RcodeSuccess {
		return nil, nil, 0, false // not a response, opcode not QUERY, truncated, or an error
	}
	qd, an, ns, ar := binary.BigEndian.Uint16(b[4:]), int(binary.BigEndian.Uint16(b[6:])), binary.BigEndian.Uint16(b[8:]), binary.BigEndian.Uint16(b[10:])
	if qd != 1 || an < 1 || an > maxWireAnswers || ns != 0 || ar > 1 || q.qclass != dns.ClassINET {
		return nil, nil, 0, false
	}
	rdlen := 4
	switch q.qtype {
	case dns.TypeA:
	case dns.TypeAAAA:
		rdlen = 16
	default:
		return nil, nil, 0, false
	}
	qend, ok := nameIs(b, headerLen, q.name)
	if !ok || qend+4 > len(b) || binary.BigEndian.Uint16(b[qend:]) != q.qtype || binary.BigEndian.Uint16(b[qend+2:]) != q.qclass {
		return nil, nil, 0, false
	}
	qname := b[headerLen:qend]
	off := qend + 4
	var ttls [maxWireAnswers]uint16
	minTTL = maxTTL
	for i := range an {
		// The owner: a pointer to the question's name, or that name.
		switch {
		case off+2 <= len(b) && b[off] == 0xc0 && b[off+1] == headerLen:
			off += 2
		case off+len(qname) <= len(b) && equalFoldASCII(b[off:off+len(qname)], qname):
			off += len(qname)
		default:
			return nil, nil, 0, false
		}
		if off+10+rdlen > len(b) || binary.BigEndian.Uint16(b[off:]) != q.qtype || binary.BigEndian.Uint16(b[off+2:]) != dns.ClassINET || int(binary.BigEndian.Uint16(b[off+8:])) != rdlen {
			return nil, nil, 0, false
		}
		ttl := binary.BigEndian.Uint32(b[off+4:])
		addr, _ := netip.AddrFromSlice(b[off+10 : off+10+rdlen])
		if _, bad := addrclass.Rebinding(addr); bad && !allowPrivate {
			return nil, nil, 0, false
		}
		learn = append(learn, Learned{Addr: addr.Unmap(), TTL: ttl})
		ttls[i] = uint16(off + 4)
		minTTL = min(minTTL, ttl)
		off += 10 + rdlen
	}
	end := off
	if ar == 1 {
		// Only an OPT record, which sluice replaces with its own.
		// Its extended rcode must be 0 too: with it the answer is an
		// error, whatever the header's four bits say.
		if off+optLen > len(b) || b[off] != 0 || binary.BigEndian.Uint16(b[off+1:]) != dns.TypeOPT || b[off+5] != 0 {
			return nil, nil, 0, false
		}
		off += optLen + int(binary.BigEndian.Uint16(b[off+9:]))
	}
	if off != len(b) || end > 0xffff {
		return nil, nil, 0, false
	}
	wire := append(make([]byte, 0, end), b[:end]...)
	wire[0], wire[1] = 0, 0
	binary.BigEndian.PutUint16(wire[10:], 0)
	for _, o := range ttls[:an] {
		if binary.BigEndian.Uint32(wire[o:]) > maxTTL {
			binary.BigEndian.PutUint32(wire[o:], maxTTL)
		}
	}
	return &packedAnswer{wire: wire, qlen: qend + 4 - headerLen, ttls: append([]uint16(nil), ttls[:an]...)}, learn, minTTL, true
}

// nameIs reports whether the uncompressed name at off in b is name
// (dotted, lower case, without the trailing dot), ignoring ASCII case, and
// returns the offset after it.
func nameIs(b []byte, off int, name string) (int, bool) {
	for {
		if off >= len(b) {
			return 0, false
		}
		l := int(b[off])
		off++
		if l == 0 {
			return off, name == ""
		}
		if l > 63 || off+l > len(b) || len(name) < l || (len(name) > l && name[l] != '.') {
			return 0, false
		}
		if !equalFoldASCII(b[off:off+l], []byte(name[:l])) {
			return 0, false
		}
		off += l
		name = name[l:]
		if name != "" {
			name = name[1:] // the dot
		}
	}
}

// equalFoldASCII compares two byte strings ignoring ASCII letter case only.
func equalFoldASCII(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
