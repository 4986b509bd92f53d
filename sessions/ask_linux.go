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
	// session reach it: long enough for the agent's retry, short like a
	// DNS answer.
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
		Apply: func(a prompts.Answer) error {
			if a.Scope == prompts.ForSession || a.Scope == prompts.Always {
				r := ss.es.Resolver()
				if r == nil {
					return fmt.Errorf("session %s has no resolver", ss.Info.Name)
				}
				r.AllowName(name)
			}
			return nil
		},
		Report: ss.promptEvent})
	return err == nil && a.Allow
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
