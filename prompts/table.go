// SPDX-License-Identifier: Apache-2.0

package prompts

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Defaults of Config, documented in the package comment.
const (
	DefaultTimeout       = 5 * time.Minute
	DefaultWindow        = 2 * time.Second
	DefaultMaxPerSession = 16
)

// Errors of Ask and Answer.
var (
	// ErrPending: the waiter's context ended first; the prompt stays open.
	ErrPending = errors.New("no answer yet (the prompt stays open)")
	// ErrCap: the session already has MaxPerSession prompts pending.
	ErrCap = errors.New("too many prompts pending for this session")
	// ErrDenied: the same question was denied earlier in this session.
	ErrDenied = errors.New("denied earlier in this session")
	// ErrNoPrompt: no pending prompt has that id.
	ErrNoPrompt = errors.New("no such pending prompt")
)

// Scope is how far an approval reaches.
type Scope string

// The scopes of an approval.
const (
	Once       Scope = "once"    // this answer's addresses, until their TTL
	ForSession Scope = "session" // the name for the rest of the session
	Always     Scope = "always"  // the machine allowlist (and this session)
)

// ParseScope checks s ("" means Once).
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case "", Once:
		return Once, nil
	case ForSession, Always:
		return Scope(s), nil
	}
	return "", fmt.Errorf("scope %q: want once, session or always", s)
}

// Kind says what a prompt asks about.
type Kind string

// The kinds of question.
const (
	KindName Kind = "name" // a DNS name the resolver holds the answer for
	KindAddr Kind = "addr" // an IP address a connect was refused for
)

// Prompt is a pending question as the API shows it.
type Prompt struct {
	ID      string    `json:"id"`
	Session string    `json:"session"`
	Name    string    `json:"name"` // the host name, or the IP address
	Kind    Kind      `json:"kind"`
	QType   string    `json:"qtype,omitempty"`
	AskedBy string    `json:"asked_by"` // the process, "comm[pid]", or the client address
	Asked   time.Time `json:"asked"`
	Expires time.Time `json:"expires"` // denied automatically then
	// State is "pending", or in a stream "granted", "denied" or "timeout".
	State string `json:"state"`
	Scope Scope  `json:"scope,omitempty"`
	By    string `json:"by,omitempty"` // who answered
}

// Answer is a person's decision.
type Answer struct {
	Allow bool
	Scope Scope  // of an approval
	By    string // who answered: "user:NAME" or "uid:N"
}

// Question is what a session asks.
type Question struct {
	Session string
	Name    string
	Kind    Kind
	QType   string
	AskedBy string
	// Apply gives the session what an approval allows before any waiter
	// learns of it (the name for the session, the address for the retry).
	// An error keeps the prompt pending and goes back to the answerer.
	Apply func(Answer) error
	// Report receives the prompt's events (may be nil).
	Report func(Event)
}

// EventKind says what happened to a prompt.
type EventKind int

// The prompt events.
const (
	Asked EventKind = iota + 1
	Granted
	Denied
	TimedOut
)

// Event is something that happened to a prompt.
type Event struct {
	Kind   EventKind
	Prompt Prompt
	Answer Answer
	Reason string // Denied without a prompt: why (the cap, the session ended)
}

// Config configures a Table; zero values take the defaults.
type Config struct {
	Timeout       time.Duration
	Window        time.Duration
	MaxPerSession int
}

type key struct{ session, name string }

type entry struct {
	p       Prompt
	q       Question
	done    chan struct{}
	ans     Answer
	timeout bool
	settled time.Time // when it was answered
	// unclaimed: approved while no one waited; the next identical
	// question takes the approval.
	unclaimed bool
	waiters   int
	timer     *time.Timer
}

// Table is the pending-prompt table. Its methods are safe for concurrent
// use.
type Table struct {
	cfg Config

	mu      sync.Mutex
	byID    map[string]*entry
	byKey   map[key]*entry // pending, or settled and still remembered
	denied  map[key]bool
	pending map[string]int // per session
	subs    map[chan Prompt]struct{}
}

// New returns an empty table.
func New(cfg Config) *Table {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxPerSession <= 0 {
		cfg.MaxPerSession = DefaultMaxPerSession
	}
	return &Table{cfg: cfg, byID: map[string]*entry{}, byKey: map[key]*entry{},
		denied: map[key]bool{}, pending: map[string]int{}, subs: map[chan Prompt]struct{}{}}
}

// Timeout is how long a prompt waits for an answer.
func (t *Table) Timeout() time.Duration { return t.cfg.Timeout }

// Ask raises q (or joins the identical pending prompt) and waits for the
// answer until ctx ends (ErrPending: the prompt stays open). A question
// denied earlier in the session gets ErrDenied at once, one past the
// session's cap ErrCap. A timed-out prompt's answer is a denial with no
// error.
func (t *Table) Ask(ctx context.Context, q Question) (Answer, error) {
	k := key{q.Session, q.Name}
	now := time.Now()
	t.mu.Lock()
	if t.denied[k] {
		t.mu.Unlock()
		return Answer{}, ErrDenied
	}
	e := t.byKey[k]
	if e != nil && !e.settled.IsZero() {
		switch {
		case e.unclaimed:
			e.unclaimed = false
			e.settled = now // its twin (A and AAAA) shares it too
			a := e.ans
			t.mu.Unlock()
			return a, nil
		case now.Sub(e.settled) <= t.cfg.Window:
			a := e.ans
			t.mu.Unlock()
			return a, nil
		}
		delete(t.byKey, k)
		e = nil
	}
	var raised *entry
	if e == nil {
		if t.pending[q.Session] >= t.cfg.MaxPerSession {
			t.mu.Unlock()
			report(q, Event{Kind: Denied, Prompt: prompt(q, "", now, t.cfg.Timeout), Reason: ErrCap.Error()})
			return Answer{}, ErrCap
		}
		e = &entry{p: prompt(q, t.newID(), now, t.cfg.Timeout), q: q, done: make(chan struct{})}
		t.byID[e.p.ID] = e
		t.byKey[k] = e
		t.pending[q.Session]++
		e.timer = time.AfterFunc(t.cfg.Timeout, func() { t.expire(e) })
		t.notify(e.p)
		raised = e
	}
	e.waiters++
	t.mu.Unlock()
	if raised != nil {
		report(q, Event{Kind: Asked, Prompt: raised.p})
	}
	select {
	case <-e.done:
		t.mu.Lock()
		e.waiters--
		a := e.ans
		t.mu.Unlock()
		return a, nil
	case <-ctx.Done():
		t.mu.Lock()
		e.waiters--
		t.mu.Unlock()
		return Answer{}, ErrPending
	}
}

func prompt(q Question, id string, now time.Time, timeout time.Duration) Prompt {
	return Prompt{ID: id, Session: q.Session, Name: q.Name, Kind: q.Kind, QType: q.QType, AskedBy: q.AskedBy,
		Asked: now.UTC(), Expires: now.Add(timeout).UTC(), State: "pending"}
}

func report(q Question, ev Event) {
	if q.Report != nil {
		q.Report(ev)
	}
}

// newID is a short random id, unique among the pending prompts; t.mu is
// held.
func (t *Table) newID() string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, taken := t.byID[id]; !taken {
			return id
		}
	}
}

// Answer settles the pending prompt id. An approval is applied to the
// session (Question.Apply) first; if that fails the prompt stays pending
// and the error is returned.
func (t *Table) Answer(id string, a Answer) (Prompt, error) {
	if a.Allow {
		s, err := ParseScope(string(a.Scope))
		if err != nil {
			return Prompt{}, err
		}
		a.Scope = s
	} else {
		a.Scope = ""
	}
	t.mu.Lock()
	e := t.byID[id]
	t.mu.Unlock()
	if e == nil {
		return Prompt{}, fmt.Errorf("%w: %s", ErrNoPrompt, id)
	}
	if a.Allow && e.q.Apply != nil {
		if err := e.q.Apply(a); err != nil {
			return Prompt{}, fmt.Errorf("prompt %s: %w", id, err)
		}
	}
	t.mu.Lock()
	if t.byID[id] != e {
		t.mu.Unlock()
		return Prompt{}, fmt.Errorf("%w: %s (it timed out meanwhile)", ErrNoPrompt, id)
	}
	p := t.settle(e, a, false)
	t.mu.Unlock()
	kind := Denied
	if a.Allow {
		kind = Granted
	}
	report(e.q, Event{Kind: kind, Prompt: p, Answer: a})
	return p, nil
}

// settle ends e's wait with a; t.mu is held. It returns the prompt as
// settled.
func (t *Table) settle(e *entry, a Answer, timedOut bool) Prompt {
	k := key{e.p.Session, e.p.Name}
	delete(t.byID, e.p.ID)
	if t.pending[e.p.Session]--; t.pending[e.p.Session] <= 0 {
		delete(t.pending, e.p.Session)
	}
	e.timer.Stop()
	e.ans, e.timeout, e.settled = a, timedOut, time.Now()
	e.unclaimed = a.Allow && e.waiters == 0
	if !a.Allow && !timedOut {
		t.denied[k] = true
	}
	close(e.done)
	// Forget it once neither the window nor an unclaimed approval needs it.
	keep := t.cfg.Window
	if e.unclaimed {
		keep = max(keep, time.Until(e.p.Expires))
	}
	time.AfterFunc(keep+t.cfg.Window, func() {
		t.mu.Lock()
		if t.byKey[k] == e {
			delete(t.byKey, k)
		}
		t.mu.Unlock()
	})
	p := e.p
	switch {
	case timedOut:
		p.State = "timeout"
	case a.Allow:
		p.State, p.Scope = "granted", a.Scope
	default:
		p.State = "denied"
	}
	p.By = a.By
	t.notify(p)
	return p
}

func (t *Table) expire(e *entry) {
	t.mu.Lock()
	if t.byID[e.p.ID] != e {
		t.mu.Unlock()
		return
	}
	p := t.settle(e, Answer{By: "timeout"}, true)
	t.mu.Unlock()
	report(e.q, Event{Kind: TimedOut, Prompt: p, Answer: Answer{By: "timeout"}})
}

// Forget denies the session's pending prompts (why: "session ended",
// "daemon stopped") and drops what the table remembers of it.
func (t *Table) Forget(session, why string) {
	t.mu.Lock()
	var gone []*entry
	var ps []Prompt
	for _, e := range t.byID {
		if e.p.Session == session {
			gone = append(gone, e)
		}
	}
	for _, e := range gone {
		ps = append(ps, t.settle(e, Answer{By: why}, true))
	}
	for k := range t.byKey {
		if k.session == session {
			delete(t.byKey, k)
		}
	}
	for k := range t.denied {
		if k.session == session {
			delete(t.denied, k)
		}
	}
	t.mu.Unlock()
	for i, e := range gone {
		report(e.q, Event{Kind: Denied, Prompt: ps[i], Answer: Answer{By: why}, Reason: why})
	}
}

// List returns the pending prompts, oldest first.
func (t *Table) List() []Prompt {
	t.mu.Lock()
	out := make([]Prompt, 0, len(t.byID))
	for _, e := range t.byID {
		out = append(out, e.p)
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Prompt) int { return a.Asked.Compare(b.Asked) })
	return out
}

// Get returns the pending prompt id.
func (t *Table) Get(id string) (Prompt, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return Prompt{}, false
	}
	return e.p, true
}

// Subscribe streams every prompt raised or settled from now on until
// cancel is called. A subscriber that falls 64 changes behind is closed
// (its channel ends): a stream that silently skipped prompts would hide
// questions from the person.
func (t *Table) Subscribe() (<-chan Prompt, func()) {
	c := make(chan Prompt, 64)
	t.mu.Lock()
	t.subs[c] = struct{}{}
	t.mu.Unlock()
	return c, func() {
		t.mu.Lock()
		if _, ok := t.subs[c]; ok {
			delete(t.subs, c)
			close(c)
		}
		t.mu.Unlock()
	}
}

// notify sends p to the subscribers; t.mu is held.
func (t *Table) notify(p Prompt) {
	for c := range t.subs {
		select {
		case c <- p:
		default:
			delete(t.subs, c)
			close(c)
		}
	}
}

// Close denies every pending prompt (why: "daemon stopped"): prompts live
// in memory only (see the package comment).
func (t *Table) Close(why string) {
	t.mu.Lock()
	seen := map[string]bool{}
	for _, e := range t.byID {
		seen[e.p.Session] = true
	}
	t.mu.Unlock()
	for s := range seen {
		t.Forget(s, why)
	}
}
