// SPDX-License-Identifier: Apache-2.0

package world

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// frame wraps an IP packet in an Ethernet header.
func frame(etherType uint16, ip []byte) []byte {
	f := make([]byte, 14, 14+len(ip))
	binary.BigEndian.PutUint16(f[12:], etherType)
	return append(f, ip...)
}

func ipv4(proto byte, options []byte, src, dst netip.Addr, l4 []byte) []byte {
	ihl := 20 + len(options)
	b := make([]byte, ihl, ihl+len(l4))
	b[0] = 0x40 | byte(ihl/4)
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	copy(b[20:], options)
	return append(b, l4...)
}

func ipv6(next byte, src, dst netip.Addr, rest []byte) []byte {
	b := make([]byte, 40, 40+len(rest))
	b[0] = 0x60
	b[6] = next
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, rest...)
}

func ports(dst uint16) []byte {
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[2:], dst)
	return l4
}

func TestParseFrame(t *testing.T) {
	srh := append([]byte{6, 4, 4, 1, 1, 0, 0, 0}, make([]byte, 32)...)
	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
		noise bool
		want  Packet
	}{{
		name:  "IPv4 TCP",
		frame: frame(0x0800, ipv4(6, nil, ClientV4, AllowedV4, ports(443))),
		ok:    true,
		want:  Packet{Src: ClientV4, Dst: AllowedV4, Proto: 6, DstPort: 443},
	}, {
		name:  "IPv4 TCP with LSRR",
		frame: frame(0x0800, ipv4(6, []byte{0x83, 7, 4, 203, 0, 113, 10, 0}, ClientV4, DeniedV4, ports(80))),
		ok:    true,
		want:  Packet{Src: ClientV4, Dst: DeniedV4, Proto: 6, DstPort: 80, IPOptions: true},
	}, {
		name:  "IPv4 ICMP echo",
		frame: frame(0x0800, ipv4(1, nil, ClientV4, AllowedV4, []byte{8, 0, 0, 0})),
		ok:    true,
		want:  Packet{Src: ClientV4, Dst: AllowedV4, Proto: 1, ICMPType: 8},
	}, {
		name:  "IPv6 UDP",
		frame: frame(0x86dd, ipv6(17, ClientV6, AllowedV6, ports(53))),
		ok:    true,
		want:  Packet{Src: ClientV6, Dst: AllowedV6, Proto: 17, DstPort: 53},
	}, {
		name:  "IPv6 TCP behind a segment routing header",
		frame: frame(0x86dd, ipv6(43, ClientV6, DeniedV6, append(srh, ports(8080)...))),
		ok:    true,
		want:  Packet{Src: ClientV6, Dst: DeniedV6, Proto: 6, DstPort: 8080, RoutingHeader: true},
	}, {
		name:  "IPv6 neighbour solicitation is noise",
		frame: frame(0x86dd, ipv6(58, ClientV6, WorldV6, []byte{135, 0, 0, 0})),
		ok:    true,
		noise: true,
		want:  Packet{Src: ClientV6, Dst: WorldV6, Proto: 58, ICMPType: 135},
	}, {
		name:  "ARP is ignored",
		frame: frame(0x0806, make([]byte, 28)),
	}, {
		name:  "truncated",
		frame: frame(0x0800, []byte{0x45, 0}),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseFrame(tc.frame)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if isNoise(got) != tc.noise {
				t.Errorf("isNoise = %v, want %v", !tc.noise, tc.noise)
			}
		})
	}
}

func TestSafe(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1":            true,
		"::1":                  true,
		"198.51.100.1":         true,
		"203.0.113.20":         true,
		"2001:db8:3::20":       true,
		"::ffff:203.0.113.10":  true,
		"192.0.2.1":            false, // the machine's uplink
		"::ffff:192.0.2.1":     false,
		"10.0.0.1":             false,
		"8.8.8.8":              false,
		"2001:4860:4860::8888": false,
		"fe80::1":              false,
	} {
		if got := Safe(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Safe(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestFilters(t *testing.T) {
	p := Packet{Src: ClientV4, Dst: AllowedV4, Proto: 6, DstPort: 443}
	for name, tc := range map[string]struct {
		f    Filter
		want bool
	}{
		"To":           {To(AllowedV4), true},
		"To mapped":    {To(netip.MustParseAddr("::ffff:203.0.113.10")), true},
		"To other":     {To(DeniedV4), false},
		"ToPort":       {ToPort(AllowedV4, 443), true},
		"ToPort other": {ToPort(AllowedV4, 80), false},
		"All":          {All(To(AllowedV4), Proto(6), From(ClientV4)), true},
		"Any":          {Any(To(DeniedV4), Proto(6)), true},
		"Not":          {Not(Proto(6)), false},
		"Everything":   {Everything, true},
	} {
		if got := tc.f(p); got != tc.want {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}
}
