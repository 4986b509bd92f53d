// SPDX-License-Identifier: Apache-2.0

package world

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Packet is one IPv4 or IPv6 packet that arrived in the world from the
// client, as the sniffer saw it on the wire.
type Packet struct {
	Time     time.Time
	Src, Dst netip.Addr
	// Proto is the upper-layer protocol after any IPv6 extension headers
	// (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, 132 SCTP, ...).
	Proto uint8
	// DstPort is the destination port for TCP, UDP, UDP-Lite, DCCP and
	// SCTP (0 otherwise, and for non-first fragments).
	DstPort uint16
	// RoutingHeader is set when an IPv6 packet carries a routing header
	// (e.g. a type-4 segment routing header).
	RoutingHeader bool
	// IPOptions is set when an IPv4 header carries options (e.g. LSRR).
	IPOptions bool
	// ICMPType is the ICMP or ICMPv6 type.
	ICMPType uint8
	// Payload is a TCP segment's data ("" for other protocols), so that
	// a test can show which bytes of a first flight reached the wire (a
	// string, so that a Packet stays comparable).
	Payload string
}

// Protocol numbers the world cares about.
const (
	protoICMP    = 1
	protoTCP     = 6
	protoUDP     = 17
	protoDCCP    = 33
	protoICMPv6  = 58
	protoSCTP    = 132
	protoUDPLite = 136
)

// String formats p for test failure messages.
func (p Packet) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %v -> %v", p.Time.Format("15:04:05.000"), protoName(p.Proto), p.Src, p.Dst)
	if p.DstPort != 0 {
		fmt.Fprintf(&b, " port %d", p.DstPort)
	}
	if p.Proto == protoICMP || p.Proto == protoICMPv6 {
		fmt.Fprintf(&b, " type %d", p.ICMPType)
	}
	if p.RoutingHeader {
		b.WriteString(" [routing header]")
	}
	if p.IPOptions {
		b.WriteString(" [IP options]")
	}
	return b.String()
}

func protoName(p uint8) string {
	switch p {
	case protoICMP:
		return "ICMP"
	case protoTCP:
		return "TCP"
	case protoUDP:
		return "UDP"
	case protoICMPv6:
		return "ICMPv6"
	case protoSCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", p)
}

// parseFrame decodes an Ethernet frame. ok is false for anything that is not
// IPv4/IPv6 or is too short to decode.
func parseFrame(frame []byte) (p Packet, ok bool) {
	if len(frame) < 14 {
		return p, false
	}
	etherType, payload := binary.BigEndian.Uint16(frame[12:]), frame[14:]
	if etherType == 0x8100 && len(payload) >= 4 { // 802.1Q tag
		etherType, payload = binary.BigEndian.Uint16(payload[2:]), payload[4:]
	}
	switch etherType {
	case 0x0800:
		return parseIPv4(payload)
	case 0x86dd:
		return parseIPv6(payload)
	}
	return p, false
}

func parseIPv4(b []byte) (p Packet, ok bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return p, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return p, false
	}
	p.Proto = b[9]
	p.Src = netip.AddrFrom4([4]byte(b[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	p.IPOptions = ihl > 20
	if tot := int(binary.BigEndian.Uint16(b[2:])); tot >= ihl && tot < len(b) {
		b = b[:tot] // link-layer padding is not payload
	}
	if binary.BigEndian.Uint16(b[6:])&0x1fff == 0 { // first fragment
		transport(&p, b[ihl:])
	}
	return p, true
}

func parseIPv6(b []byte) (p Packet, ok bool) {
	if len(b) < 40 || b[0]>>4 != 6 {
		return p, false
	}
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	if pl := int(binary.BigEndian.Uint16(b[4:])); pl > 0 && 40+pl < len(b) {
		b = b[:40+pl] // link-layer padding is not payload
	}
	next, rest := b[6], b[40:]
	for {
		var hdrLen int
		switch next {
		case 0, 60: // hop-by-hop, destination options
			if len(rest) < 2 {
				p.Proto = next
				return p, true
			}
			hdrLen = (int(rest[1]) + 1) * 8
		case 43: // routing
			p.RoutingHeader = true
			if len(rest) < 2 {
				p.Proto = next
				return p, true
			}
			hdrLen = (int(rest[1]) + 1) * 8
		case 51: // authentication header
			if len(rest) < 2 {
				p.Proto = next
				return p, true
			}
			hdrLen = (int(rest[1]) + 2) * 4
		case 44: // fragment
			if len(rest) < 8 {
				p.Proto = next
				return p, true
			}
			if binary.BigEndian.Uint16(rest[2:])&0xfff8 != 0 { // not the first fragment
				p.Proto = rest[0]
				return p, true
			}
			hdrLen = 8
		default:
			p.Proto = next
			transport(&p, rest)
			return p, true
		}
		if hdrLen > len(rest) {
			p.Proto = next
			return p, true
		}
		next, rest = rest[0], rest[hdrLen:]
	}
}

// transport fills in the destination port or ICMP type from l4.
func transport(p *Packet, l4 []byte) {
	switch p.Proto {
	case protoTCP, protoUDP, protoUDPLite, protoDCCP, protoSCTP:
		if len(l4) >= 4 {
			p.DstPort = binary.BigEndian.Uint16(l4[2:])
		}
		if p.Proto == protoTCP && len(l4) >= 20 {
			if off := int(l4[12]>>4) * 4; off >= 20 && off < len(l4) {
				p.Payload = string(l4[off:])
			}
		}
	case protoICMP, protoICMPv6:
		if len(l4) >= 1 {
			p.ICMPType = l4[0]
		}
	}
}

// isNoise reports link housekeeping that no test is about: ICMPv6 neighbour
// and router discovery, redirects and multicast listener reports.
func isNoise(p Packet) bool {
	if p.Proto != protoICMPv6 {
		return false
	}
	switch p.ICMPType {
	case 130, 131, 132, 143: // MLD query, report, done; MLDv2 report
		return true
	case 133, 134, 135, 136, 137: // RS, RA, NS, NA, redirect
		return true
	case 141, 142, 151, 152, 153: // inverse ND, multicast router discovery
		return true
	}
	return false
}

// Filter selects packets.
type Filter func(Packet) bool

// Everything matches every packet.
func Everything(Packet) bool { return true }

// To matches packets whose IP destination is addr.
func To(addr netip.Addr) Filter {
	addr = addr.Unmap()
	return func(p Packet) bool { return p.Dst == addr }
}

// ToPort matches TCP/UDP/SCTP packets to addr:port.
func ToPort(addr netip.Addr, port uint16) Filter {
	addr = addr.Unmap()
	return func(p Packet) bool { return p.Dst == addr && p.DstPort == port }
}

// From matches packets whose IP source is addr.
func From(addr netip.Addr) Filter {
	addr = addr.Unmap()
	return func(p Packet) bool { return p.Src == addr }
}

// Proto matches packets of an upper-layer protocol (6 TCP, 17 UDP, ...).
func Proto(proto uint8) Filter {
	return func(p Packet) bool { return p.Proto == proto }
}

// Since matches packets seen at or after t, to ignore earlier traffic in a
// world that several steps of a test share.
func Since(t time.Time) Filter {
	return func(p Packet) bool { return !p.Time.Before(t) }
}

// All matches packets that every filter matches.
func All(fs ...Filter) Filter {
	return func(p Packet) bool {
		for _, f := range fs {
			if !f(p) {
				return false
			}
		}
		return true
	}
}

// Any matches packets that at least one filter matches.
func Any(fs ...Filter) Filter {
	return func(p Packet) bool {
		for _, f := range fs {
			if f(p) {
				return true
			}
		}
		return false
	}
}

// Not inverts a filter.
func Not(f Filter) Filter {
	return func(p Packet) bool { return !f(p) }
}
