// SPDX-License-Identifier: Apache-2.0

package sessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/addrclass"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/prompts"
)

// Ask mode, the session's side: its resolver asks the service's prompt
// table (Config.Prompts, the daemon's) about names its policy lacks, and
// a refused connect to an address nobody resolved raises a prompt too.
const (
	// OnceAddrTTL is how long a "once" approval of an address lets the
	// session reach it, and how long a "once" approval of a name lets the
	// session's connections to its learned addresses carry that name (the
	// kernel's name check, the verifier, the proxy's tunnels), counted
	// from when the answer is used: long enough for the agent's retry,
	// short like a DNS answer. The addresses the answer taught the
	// resolver keep their own TTL; past this one, a connection to them
	// naming the name is refused, and the next query asks again.
	OnceAddrTTL = time.Minute
	// sessionAddrTTL is a "session" approval of an address: for the
	// rest of the session (its map entries go with it).
	sessionAddrTTL = 100 * 365 * 24 * time.Hour
)

// ErrAskNeedsDaemon: an ask-mode session was asked of a service without a
// prompt table (`sluice run --ask` without the daemon).
var ErrAskNeedsDaemon = errors.New("--ask needs the sluice daemon: prompts are answered with `sluice approve`/`sluice deny` through it, never from inside the session (start `sluice daemon`, or use --ask=never)")

// askDNS is the session's dnsresolver.Config.Ask.
func (ss *Session) askDNS(ctx context.Context, q dnsresolver.AskQuery) bool {
	who := ""
	if es := ss.es; es != nil {
		who = es.SocketOwner(q.Client)
	}
	if who == "" && q.Client.IsValid() {
		who = q.Client.String()
	}
	if who == "" {
		who = "the session's proxy" // LookupNetIP: no socket of the session asked
	}
	name := q.Name
	a, err := ss.sv.cfg.Prompts.Ask(ctx, prompts.Question{Session: ss.Info.Name, Name: name, Kind: prompts.KindName, QType: q.QType, AskedBy: who,
		Apply:  func(a prompts.Answer) error { return ss.approveName(name, a.Scope) },
		Report: ss.promptEvent})
	if err == nil && a.Allow && a.Scope == prompts.Once {
		// A once answer serves whoever asks within its window (this
		// query's twin, A beside AAAA) and an approval nobody waited for
		// serves the retry that claims it, maybe minutes later, without
		// Apply: the name's window starts again with each query it
		// answers, before the client gets the addresses.
		if err := ss.approveName(name, prompts.Once); err != nil {
			return false
		}
	}
	return err == nil && a.Allow
}

// approveName applies an approval of name to the session: the resolver
// may resolve it (session, always: for the rest of the session; once:
// the query that asked), and the session's name checks let connections
// to its learned addresses carry it (once: for OnceAddrTTL), or the
// kernel would refuse the very connection the person allowed.
func (ss *Session) approveName(name string, scope prompts.Scope) error {
	if ss.es == nil {
		return fmt.Errorf("session %s has no datapath session", ss.Info.Name)
	}
	ttl := OnceAddrTTL
	if scope == prompts.ForSession || scope == prompts.Always {
		r := ss.es.Resolver()
		if r == nil {
			return fmt.Errorf("session %s has no resolver", ss.Info.Name)
		}
		r.AllowName(name)
		ttl = 0 // for the rest of the session
	}
	if err := ss.es.ApproveName(name, ttl); err != nil {
		return fmt.Errorf("session %s: %w", ss.Info.Name, err)
	}
	return nil
}

// askAddr raises a prompt for a connect the datapath refused to an
// address the session never resolved (an IP literal): the connect has
// failed already (the kernel cannot wait), and an approval lets the
// agent's retry through.
func (ss *Session) askAddr(ev loader.Event) {
	if !ss.Info.Ask || ss.sv.cfg.Prompts == nil || ev.Audit || ev.IsUnix() || ev.Reason != loader.ReasonNotAllowed || !ev.Addr.IsValid() {
		return
	}
	switch ev.Hook {
	case loader.HookConnect4, loader.HookConnect6, loader.HookSendmsg4, loader.HookSendmsg6:
	default:
		return
	}
	a := ev.Addr.Unmap()
	if _, bad := addrclass.Rebinding(a); bad {
		return // the rebinding guard refuses these outright
	}
	r := ss.es.Resolver()
	if r == nil || len(r.LearnedFrom(a)) > 0 {
		return // an address of a name: the name was asked about
	}
	who := fmt.Sprintf("%s[%d]", ev.Comm, ev.PID)
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-ss.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		_, _ = ss.sv.cfg.Prompts.Ask(ctx, prompts.Question{Session: ss.Info.Name, Name: a.String(), Kind: prompts.KindAddr, AskedBy: who,
			Apply: func(ans prompts.Answer) error {
				ttl := OnceAddrTTL
				if ans.Scope != prompts.Once {
					ttl = sessionAddrTTL
				}
				return r.AllowAddr(a, ttl)
			},
			Report: ss.promptEvent})
	}()
}

// promptEvent reports a prompt's event in the session's story. Denials
// without a prompt (the cap) are deny lines, rate-limited with the rest.
func (ss *Session) promptEvent(ev prompts.Event) {
	e := audit.FromPrompt(ev)
	if ss.sv.cfg.OnPermission != nil {
		ss.sv.cfg.OnPermission(e.Type)
	}
	if ev.Prompt.ID == "" {
		ss.Deliver(e)
		return
	}
	ss.publish(e)
}
