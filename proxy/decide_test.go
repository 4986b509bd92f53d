// SPDX-License-Identifier: Apache-2.0

package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/addrclass"
	"github.com/sluice-dev/sluice/allowlist"
)

// TestDecide is the rule table: what is allowed, what is dialled, and what
// a refusal says. No sockets: decide only reads the policy and resolves.
func TestDecide(t *testing.T) {
	pol := mustPolicy(t,
		"allowed.test", "*.wild.test", "bücher.example", "private:intranet.test",
		"rebind-lo.test", "rebind-10.test", "rebind-meta.test", "rebind-mixed.test",
		"rebind-mapped.test", "rebind-nat64.test", "nxdomain.test", "empty.test",
		"203.0.113.0/28", "2001:db8:2::/64", "10.1.0.0/16")
	resolver := newFakeResolver(map[string]string{
		"allowed.test":          "203.0.113.10,2001:db8:2::10,203.0.113.10",
		"a.b.wild.test":         "203.0.113.11",
		"xn--bcher-kva.example": "203.0.113.12",
		"intranet.test":         "10.0.0.5,127.0.0.1",
		"rebind-lo.test":        "127.0.0.1",
		"rebind-10.test":        "10.0.0.5",
		"rebind-meta.test":      "169.254.169.254",
		"rebind-mixed.test":     "10.0.0.5,203.0.113.13,169.254.169.254",
		"rebind-mapped.test":    "::ffff:127.0.0.1",
		"rebind-nat64.test":     "64:ff9b::a9fe:a9fe",
		"empty.test":            "",
		"denied.test":           "203.0.113.20",
	})
	var events []Event
	p, err := New(Config{
		Policy:  func() *allowlist.Policy { return pol },
		Resolve: resolver.Resolve,
		OnEvent: func(e Event) { events = append(events, e) },
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		host string
		want string // addresses, comma-separated, when allowed
		kind EventKind
		why  string // substring of the reason when refused or failed
		// asked is the name the resolver must have been asked, "" if none.
		asked string
		event string // substring of an EventRebinding, if one is expected
	}{
		// Names.
		{host: "allowed.test", want: "203.0.113.10,2001:db8:2::10", asked: "allowed.test"},
		{host: "ALLOWED.Test.", want: "203.0.113.10,2001:db8:2::10", asked: "allowed.test"},
		{host: "a.b.wild.test", want: "203.0.113.11", asked: "a.b.wild.test"},
		{host: "wild.test", kind: EventRefused, why: "wild.test is not in the allowlist"},
		{host: "BÜCHER.example.", want: "203.0.113.12", asked: "xn--bcher-kva.example"},
		{host: "xn--bcher-kva.example", want: "203.0.113.12", asked: "xn--bcher-kva.example"},
		{host: "denied.test", kind: EventRefused, why: "denied.test is not in the allowlist"},
		{host: "evil.example", kind: EventRefused, why: "evil.example is not in the allowlist"},
		{host: "allowed.test.evil.example", kind: EventRefused, why: "not in the allowlist"},
		{host: "127.1", kind: EventRefused, why: "not a valid host name"},
		{host: "0x7f000001", kind: EventRefused, why: "not a valid host name"},
		{host: "010.0.0.1", kind: EventRefused, why: "not a valid host name"},
		{host: "exa mple.test", kind: EventRefused, why: "not a valid host name"},
		{host: "nxdomain.test", kind: EventFailed, why: "no such host", asked: "nxdomain.test"},
		{host: "empty.test", kind: EventFailed, why: "has no addresses", asked: "empty.test"},

		// localhost is loopback, answered without a resolver.
		{host: "localhost", want: "127.0.0.1,::1"},
		{host: "LocalHost.", want: "127.0.0.1,::1"},
		{host: "api.localhost", want: "127.0.0.1,::1"},

		// Rebinding: answers pointing inside are dropped, and if nothing
		// is left the request is refused, naming what was dropped.
		{host: "rebind-lo.test", kind: EventRefused, why: "127.0.0.1 (loopback)", asked: "rebind-lo.test"},
		{host: "rebind-10.test", kind: EventRefused, why: "10.0.0.5 (private (RFC 1918))", asked: "rebind-10.test"},
		{host: "rebind-meta.test", kind: EventRefused, why: "169.254.169.254 (link-local (cloud metadata))", asked: "rebind-meta.test"},
		{host: "rebind-mapped.test", kind: EventRefused, why: "127.0.0.1 (loopback)", asked: "rebind-mapped.test"},
		{host: "rebind-nat64.test", kind: EventRefused, why: "link-local", asked: "rebind-nat64.test"},
		{host: "rebind-mixed.test", want: "203.0.113.13", asked: "rebind-mixed.test",
			event: "dropped 10.0.0.5 (private (RFC 1918)), 169.254.169.254 (link-local (cloud metadata)) from the addresses of rebind-mixed.test"},
		{host: "intranet.test", want: "10.0.0.5,127.0.0.1", asked: "intranet.test"}, // allow_private

		// IP literals: loopback, or covered by an IP/CIDR entry.
		{host: "127.0.0.1", want: "127.0.0.1"},
		{host: "127.8.9.10", want: "127.8.9.10"},
		{host: "::1", want: "::1"},
		{host: "::ffff:127.0.0.1", want: "127.0.0.1"},
		{host: "203.0.113.5", want: "203.0.113.5"},
		{host: "::ffff:203.0.113.5", want: "203.0.113.5"},
		{host: "2001:db8:2::99", want: "2001:db8:2::99"},
		{host: "10.1.2.3", want: "10.1.2.3"}, // an explicit CIDR entry may be private
		{host: "203.0.113.20", kind: EventRefused, why: "203.0.113.20 is an IP address that no allowlist entry covers"},
		{host: "2001:db8:3::20", kind: EventRefused, why: "no allowlist entry covers"},
		{host: "169.254.169.254", kind: EventRefused, why: "no allowlist entry covers"},
		{host: "0.0.0.0", kind: EventRefused, why: "no allowlist entry covers"},
		{host: "::", kind: EventRefused, why: "no allowlist entry covers"},
		{host: "64:ff9b::cb00:710a", kind: EventRefused, why: "no allowlist entry covers"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			before := len(resolver.Asked())
			events = nil
			tg, err := newTarget(tc.host, 443)
			if err != nil {
				t.Fatal(err)
			}
			ev := Event{Protocol: ProtoConnect, Host: tc.host, Port: 443}
			addrs, f := p.decide(context.Background(), &ev, tg)
			asked := resolver.Asked()[before:]
			switch {
			case tc.asked == "" && len(asked) > 0:
				t.Errorf("resolver asked %q, want no resolution", asked)
			case tc.asked != "" && !slices.Equal(asked, []string{tc.asked}):
				t.Errorf("resolver asked %q, want %q", asked, tc.asked)
			}
			if tc.kind != 0 {
				if f == nil {
					t.Fatalf("allowed %v, want %v (%s)", addrs, tc.kind, tc.why)
				}
				if f.kind != tc.kind || !strings.Contains(f.reason, tc.why) {
					t.Errorf("got %v %q, want %v containing %q", f.kind, f.reason, tc.kind, tc.why)
				}
				if f.kind == EventRefused && (f.status != http.StatusForbidden || f.socks != socksNotAllowed) {
					t.Errorf("refusal answers %d / SOCKS %#x, want 403 / 0x02", f.status, f.socks)
				}
				return
			}
			if f != nil {
				t.Fatalf("refused (%v: %s), want %s", f.kind, f.reason, tc.want)
			}
			if got := join(addrs); got != tc.want {
				t.Errorf("addresses %s, want %s", got, tc.want)
			}
			if tc.event != "" {
				if len(events) != 1 || events[0].Kind != EventRebinding || !strings.Contains(events[0].Reason, tc.event) {
					t.Errorf("events %v, want one rebinding event containing %q", events, tc.event)
				}
			} else if len(events) > 0 {
				t.Errorf("unexpected events %v", events)
			}
		})
	}
}

func join(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

// TestDecideNilPolicy: no policy means loopback only.
func TestDecideNilPolicy(t *testing.T) {
	p, err := New(Config{Resolve: func(context.Context, string) ([]netip.Addr, error) {
		t.Error("resolver called")
		return nil, errors.New("no")
	}})
	if err != nil {
		t.Fatal(err)
	}
	for host, allowed := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "example.com": false, "203.0.113.10": false} {
		tg, _ := newTarget(host, 80)
		_, f := p.decide(context.Background(), &Event{}, tg)
		if (f == nil) != allowed {
			t.Errorf("%s: allowed %v, want %v (%v)", host, f == nil, allowed, f)
		}
	}
}

// TestDialOrder: addresses are tried in order until one answers, and the
// failure names every attempt.
func TestDialOrder(t *testing.T) {
	var tried []netip.AddrPort
	p, err := New(Config{Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
		tried = append(tried, ap)
		if want := map[bool]string{true: "tcp4", false: "tcp6"}[ap.Addr().Is4()]; network != want {
			t.Errorf("network %s for %v, want %s", network, ap, want)
		}
		if ap.Addr() == netip.MustParseAddr("203.0.113.3") {
			c1, c2 := net.Pipe()
			c2.Close()
			return c1, nil
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}})
	if err != nil {
		t.Fatal(err)
	}
	addrs := []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("203.0.113.2"), netip.MustParseAddr("203.0.113.3")}
	c, _, f := p.dial(context.Background(), addrs, 443)
	if f != nil {
		t.Fatalf("dial: %v", f)
	}
	c.Close()
	if len(tried) != 3 {
		t.Errorf("tried %v", tried)
	}

	tried = nil
	_, _, f = p.dial(context.Background(), addrs[:2], 443)
	if f == nil {
		t.Fatal("dial succeeded")
	}
	if f.kind != EventFailed || f.status != http.StatusBadGateway || f.socks != socksConnectionRefused ||
		!strings.Contains(f.reason, "[2001:db8::1]:443") || !strings.Contains(f.reason, "203.0.113.2:443") {
		t.Errorf("failure %+v", f)
	}
}

// TestDialFailureCodes maps dial errors onto HTTP and SOCKS answers.
func TestDialFailureCodes(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		socks  byte
	}{
		{syscall.ECONNREFUSED, 502, socksConnectionRefused},
		{syscall.ENETUNREACH, 502, socksNetworkUnreachable},
		{syscall.EHOSTUNREACH, 502, socksHostUnreachable},
		{context.DeadlineExceeded, 504, socksHostUnreachable},
		{os.ErrDeadlineExceeded, 504, socksHostUnreachable},
		{errors.New("something else"), 502, socksGeneralFailure},
	} {
		f := dialFailure(fmt.Errorf("dial: %w", tc.err), netip.Addr{})
		if f.status != tc.status || f.socks != tc.socks {
			t.Errorf("%v: %d / %#x, want %d / %#x", tc.err, f.status, f.socks, tc.status, tc.socks)
		}
	}
}

// TestDialTimeoutShared: a black-holed first address does not take the
// whole budget from the next one.
func TestDialTimeoutShared(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Timeout: 6 * time.Second, Dial: func(ctx context.Context, network string, ap netip.AddrPort) (net.Conn, error) {
		if ap.Addr() == netip.MustParseAddr("203.0.113.1") {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		c1, c2 := net.Pipe()
		c2.Close()
		return c1, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, _, f := p.dial(context.Background(), []netip.Addr{netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")}, 80)
	if f != nil {
		t.Fatalf("dial: %v", f)
	}
	c.Close()
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("second address reached after %v, want about half of the 6 s budget", d)
	}
}

// TestDecideResolverRefused: a resolver that filters as the proxy does
// (the session's) and found nothing usable gives the proxy's own refusal,
// 403, not a failed lookup.
func TestDecideResolverRefused(t *testing.T) {
	pol := mustPolicy(t, "intranet.test")
	refused := &addrclass.RefusedError{Name: "intranet.test", Refused: []addrclass.Refusal{{Addr: netip.MustParseAddr("10.0.0.5"), Why: "private (RFC 1918)"}}}
	p, err := New(Config{
		Policy:  func() *allowlist.Policy { return pol },
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, fmt.Errorf("wrapped: %w", refused) },
	})
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := newTarget("intranet.test", 443)
	_, f := p.decide(context.Background(), &Event{}, tg)
	if f == nil || f.kind != EventRefused || f.status != 403 || f.proxyStatus != "destination_ip_prohibited" ||
		!strings.Contains(f.reason, "10.0.0.5 (private (RFC 1918))") || !strings.Contains(f.reason, "allow_private") {
		t.Fatalf("decide = %+v, want a 403 refusal naming the dropped address", f)
	}
}
