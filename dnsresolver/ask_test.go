// SPDX-License-Identifier: Apache-2.0

package dnsresolver

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var askZone = zone{
	"new.example.org. A":  {"new.example.org. 300 IN A 203.0.113.9"},
	"deny.example.org. A": {"deny.example.org. 300 IN A 203.0.113.10"},
	"held.example.org. A": {"held.example.org. 300 IN A 203.0.113.11"},
}

// TestAskHoldsAndAllows: a name the policy lacks is held while Ask
// decides; allowed, it is forwarded and learned; refused, it is REFUSED
// and never forwarded; past AskHold it is REFUSED.
func TestAskHoldsAndAllows(t *testing.T) {
	var mu sync.Mutex
	var asked []AskQuery
	e := newEnv(t, askZone, nil, func(c *Config) {
		c.AskHold = 50 * time.Millisecond
		c.Ask = func(ctx context.Context, q AskQuery) bool {
			mu.Lock()
			asked = append(asked, q)
			mu.Unlock()
			switch q.Name {
			case "new.example.org":
				time.Sleep(10 * time.Millisecond) // a person thinking
				return true
			case "held.example.org":
				<-ctx.Done() // nobody answers within the hold
				return false
			}
			return false
		}
	})
	if m := e.ask(t, "new.example.org.", dns.TypeA); m.Rcode != dns.RcodeSuccess || len(answerAddrs(m)) != 1 {
		t.Fatalf("approved name: %s %v", rcode(m), answerAddrs(m))
	}
	if _, ok := e.learner.addrs()[mustAddr("203.0.113.9")]; !ok {
		t.Fatal("the approved answer was not learned")
	}
	for _, name := range []string{"deny.example.org.", "held.example.org."} {
		if m := e.ask(t, name, dns.TypeA); m.Rcode != dns.RcodeRefused {
			t.Fatalf("%s: %s, want REFUSED", name, rcode(m))
		}
		if n := e.stub.count(name); n != 0 {
			t.Fatalf("%s was forwarded %d times", name, n)
		}
	}
	// Allowed for the session: answered with no question.
	e.r.AllowName("deny.example.org")
	if m := e.ask(t, "deny.example.org.", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("name allowed for the session: %s", rcode(m))
	}
	// Allowed names are never asked about.
	e.ask(t, "api.example.com.", dns.TypeA)
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("asked %+v, want the three unlisted names once each", asked)
	}
	if !asked[0].Client.Addr().IsLoopback() || asked[0].QType != "A" {
		t.Fatalf("question %+v", asked[0])
	}
}

func TestAllowAddrLearns(t *testing.T) {
	e := newEnv(t, apiZone, nil)
	a := mustAddr("203.0.113.77")
	if err := e.r.AllowAddr(a, time.Minute); err != nil {
		t.Fatal(err)
	}
	exp, ok := e.learner.addrs()[a]
	if !ok || exp != e.clock.Now()+time.Minute {
		t.Fatalf("learned %v %v", exp, ok)
	}
}
