package loader

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Hook names the kernel hook that made a decision.
type Hook uint8

// The hooks, as numbered in bpf/sluice.h.
const (
	HookConnect4    Hook = 1
	HookConnect6    Hook = 2
	HookSendmsg4    Hook = 3
	HookSendmsg6    Hook = 4
	HookSockCreate  Hook = 5
	HookSetsockopt  Hook = 6
	HookEgress      Hook = 7
	HookUnixConnect Hook = 8
	HookUnixSend    Hook = 9
)

func (h Hook) String() string {
	switch h {
	case HookConnect4:
		return "connect4"
	case HookConnect6:
		return "connect6"
	case HookSendmsg4:
		return "sendmsg4"
	case HookSendmsg6:
		return "sendmsg6"
	case HookSockCreate:
		return "sock_create"
	case HookSetsockopt:
		return "setsockopt"
	case HookEgress:
		return "egress"
	case HookUnixConnect:
		return "unix_connect"
	case HookUnixSend:
		return "unix_send"
	}
	return fmt.Sprintf("hook(%d)", uint8(h))
}

// Reason says why the datapath refused something.
type Reason uint8

// The reasons, as numbered in bpf/sluice.h.
const (
	ReasonNotAllowed      Reason = 1
	ReasonNoSession       Reason = 2
	ReasonExpired         Reason = 3
	ReasonSocketType      Reason = 4
	ReasonSourceRoute     Reason = 5
	ReasonForeignListener Reason = 6
	ReasonLoopbackPort    Reason = 7
)

// String is the explanation a user reads.
func (r Reason) String() string {
	switch r {
	case ReasonNotAllowed:
		return "not in the allowlist"
	case ReasonNoSession:
		return "process is in the sluice cgroup but has no session (loopback only)"
	case ReasonExpired:
		return "learned from DNS but the answer's TTL expired; resolve the name again"
	case ReasonSocketType:
		return "only TCP and UDP sockets are allowed"
	case ReasonSourceRoute:
		return "source routing could steer packets past the allowlist"
	case ReasonForeignListener:
		return "another session's sluice proxy or resolver (each session reaches only its own)"
	case ReasonLoopbackPort:
		return `loopback "session": not a listener of this session nor in loopback_ports`
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Event is one deny (or, in audit mode, would-deny) decision of the kernel.
type Event struct {
	Time     time.Duration // CLOCK_BOOTTIME at the decision
	Cgroup   uint64        // the session's cgroup id
	PID, TID uint32
	UID      uint32
	Hook     Hook
	Reason   Reason
	Audit    bool // allowed because the session is in audit mode
	Addr     netip.Addr
	Port     uint16
	Proto    uint8
	// Args carry the socket() family/type/protocol or the setsockopt()
	// level/optname/optlen.
	Args [3]int32
	Comm string
	// Unix is the unix socket a HookUnixConnect or HookUnixSend event
	// tried to reach: the name its server bound, "/path" or "@abstract".
	Unix string
}

// IsUnix reports whether the event is about a unix socket.
func (e Event) IsUnix() bool { return e.Hook == HookUnixConnect || e.Hook == HookUnixSend }

// eventSize is sizeof(struct event) in bpf/sluice.h.
const eventSize = 80

// unixEventSize is sizeof(struct unix_event): the event, then the name.
const unixEventSize = eventSize + 8 + 112

// ParseEvent decodes a ring buffer record. The datapath writes the host's
// byte order; sluice's objects are little-endian only (bpfel).
func ParseEvent(b []byte) (Event, error) {
	if len(b) < eventSize {
		return Event{}, fmt.Errorf("event record of %d bytes, want %d", len(b), eventSize)
	}
	le := binary.LittleEndian
	e := Event{
		Time:   time.Duration(le.Uint64(b[0:])),
		Cgroup: le.Uint64(b[8:]),
		PID:    le.Uint32(b[16:]),
		TID:    le.Uint32(b[20:]),
		UID:    le.Uint32(b[24:]),
		Hook:   Hook(b[28]),
		Reason: Reason(b[29]),
		Audit:  b[30]&1 != 0,
		Port:   le.Uint16(b[32:]),
		Proto:  b[34],
	}
	family := b[31]
	var a [16]byte
	copy(a[:], b[36:52])
	addr := netip.AddrFrom16(a)
	if family == 2 || addr.Is4In6() {
		addr = addr.Unmap()
	}
	if e.IsUnix() {
		if len(b) < unixEventSize {
			return Event{}, fmt.Errorf("unix event record of %d bytes, want %d", len(b), unixEventSize)
		}
		n := min(int(le.Uint32(b[eventSize+4:])), 112)
		e.Unix = unixName(b[eventSize] != 0, b[eventSize+8:eventSize+8+n])
	} else if e.Hook != HookSockCreate && e.Hook != HookSetsockopt {
		e.Addr = addr
	}
	for i := range e.Args {
		e.Args[i] = int32(le.Uint32(b[52+4*i:]))
	}
	comm := b[64:80]
	if i := strings.IndexByte(string(comm), 0); i >= 0 {
		comm = comm[:i]
	}
	e.Comm = string(comm)
	return e, nil
}

// ProtoName names an IP protocol number for messages.
func ProtoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmpv6"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	case 255:
		return "raw"
	}
	return fmt.Sprintf("proto %d", p)
}

// Destination describes what the event tried to reach, in the words a user
// needs to act on it.
func (e Event) Destination() string {
	switch e.Hook {
	case HookSockCreate:
		return fmt.Sprintf("socket(%s, %s, %s)", familyName(e.Args[0]), typeName(e.Args[1]), ProtoName(uint8(e.Args[2])))
	case HookSetsockopt:
		return fmt.Sprintf("setsockopt(%s)", sockoptName(e.Args[0], e.Args[1]))
	case HookEgress:
		return fmt.Sprintf("%s (source-routed %s packet)", e.Addr, ProtoName(e.Proto))
	case HookUnixConnect, HookUnixSend:
		return "unix:" + printable(e.Unix)
	}
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(e.Addr, e.Port), ProtoName(e.Proto))
}

// String is the one line sluice prints for a denial.
func (e Event) String() string {
	verb := "denied"
	if e.Audit {
		verb = "audit: would deny"
	}
	return fmt.Sprintf("%s %s[%d] -> %s: %s", verb, e.Comm, e.PID, e.Destination(), e.Reason)
}

func familyName(f int32) string {
	switch f {
	case 2:
		return "AF_INET"
	case 10:
		return "AF_INET6"
	}
	return fmt.Sprintf("family %d", f)
}

func typeName(t int32) string {
	switch t {
	case 1:
		return "SOCK_STREAM"
	case 2:
		return "SOCK_DGRAM"
	case 3:
		return "SOCK_RAW"
	case 5:
		return "SOCK_SEQPACKET"
	}
	return fmt.Sprintf("type %d", t)
}

func sockoptName(level, name int32) string {
	switch {
	case level == 0 && name == 4:
		return "IP_OPTIONS"
	case level == 41 && name == 57:
		return "IPV6_RTHDR"
	case level == 41 && name == 5:
		return "IPV6_2292RTHDR"
	case level == 41 && name == 6:
		return "IPV6_2292PKTOPTIONS"
	}
	return fmt.Sprintf("level %d, option %d", level, name)
}

// printable escapes what a terminal must not receive raw (abstract names
// may hold any byte, NULs included).
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' {
			fmt.Fprintf(&b, "\\x%02x", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unixName is the allowlist's form of a unix socket name.
func unixName[T int8 | uint8](abstract bool, p []T) string {
	b := make([]byte, len(p))
	for i, c := range p {
		b[i] = byte(c)
	}
	if abstract {
		return "@" + string(b)
	}
	return string(b)
}
