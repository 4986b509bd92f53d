// SPDX-License-Identifier: Apache-2.0

package prompts

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitPending waits (bounded) until the table has n pending prompts.
func waitPending(t *testing.T, tb *Table, n int) []Prompt {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps := tb.List()
		if len(ps) == n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d pending prompts, have %d", n, len(ps))
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	a   Answer
	err error
}

func ask(tb *Table, ctx context.Context, q Question) <-chan result {
	c := make(chan result, 1)
	go func() {
		a, err := tb.Ask(ctx, q)
		c <- result{a, err}
	}()
	return c
}

func get(t *testing.T, c <-chan result) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Ask did not return")
		return result{}
	}
}

func TestDedupAndOnceApproval(t *testing.T) {
	tb := New(Config{})
	var events []EventKind
	var mu sync.Mutex
	q := Question{Session: "s1", Name: "new.test", Kind: KindName, AskedBy: "curl[7]",
		Report: func(e Event) { mu.Lock(); events = append(events, e.Kind); mu.Unlock() }}
	a1 := ask(tb, context.Background(), q)
	a2 := ask(tb, context.Background(), q)
	ps := waitPending(t, tb, 1)
	time.Sleep(10 * time.Millisecond) // both waiters joined (one prompt either way)
	if len(tb.List()) != 1 {
		t.Fatalf("identical questions raised %d prompts", len(tb.List()))
	}
	if ps[0].Session != "s1" || ps[0].Name != "new.test" || ps[0].AskedBy != "curl[7]" || ps[0].State != "pending" {
		t.Fatalf("prompt %+v", ps[0])
	}
	if _, err := tb.Answer(ps[0].ID, Answer{Allow: true, Scope: Once, By: "user:alice"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []<-chan result{a1, a2} {
		r := get(t, c)
		if r.err != nil || !r.a.Allow || r.a.Scope != Once || r.a.By != "user:alice" {
			t.Fatalf("waiter got %+v", r)
		}
	}
	// Within the window, the twin question shares the answer.
	if a, err := tb.Ask(context.Background(), q); err != nil || !a.Allow {
		t.Fatalf("twin within the window: %+v %v", a, err)
	}
	if len(tb.List()) != 0 {
		t.Fatal("a prompt is left pending")
	}
	if _, err := tb.Answer(ps[0].ID, Answer{}); !errors.Is(err, ErrNoPrompt) {
		t.Fatalf("answering twice: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 2 || events[0] != Asked || events[1] != Granted {
		t.Fatalf("events %v", events)
	}
}

func TestOnceAfterWindowAsksAgain(t *testing.T) {
	tb := New(Config{Window: time.Millisecond})
	q := Question{Session: "s1", Name: "new.test"}
	c := ask(tb, context.Background(), q)
	p := waitPending(t, tb, 1)[0]
	if _, err := tb.Answer(p.ID, Answer{Allow: true, Scope: Once}); err != nil {
		t.Fatal(err)
	}
	get(t, c)
	time.Sleep(5 * time.Millisecond)
	c = ask(tb, context.Background(), q)
	if p2 := waitPending(t, tb, 1)[0]; p2.ID == p.ID {
		t.Fatal("a once approval answered a later question")
	}
	tb.Forget("s1", "session ended")
	if r := get(t, c); r.a.Allow {
		t.Fatal("a forgotten session's prompt was approved")
	}
}

func TestDenyIsRemembered(t *testing.T) {
	tb := New(Config{Window: time.Millisecond})
	var denied atomic.Int32
	q := Question{Session: "s1", Name: "bad.test", Report: func(e Event) {
		if e.Kind == Denied {
			denied.Add(1)
		}
	}}
	c := ask(tb, context.Background(), q)
	p := waitPending(t, tb, 1)[0]
	if _, err := tb.Answer(p.ID, Answer{By: "user:alice"}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, c); r.err != nil || r.a.Allow {
		t.Fatalf("denied prompt answered %+v", r)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := tb.Ask(context.Background(), q); !errors.Is(err, ErrDenied) {
		t.Fatalf("same question after a deny: %v", err)
	}
	if len(tb.List()) != 0 {
		t.Fatal("a denied question asked again")
	}
	// Another session is not bound by it.
	other := q
	other.Session = "s2"
	c = ask(tb, context.Background(), other)
	waitPending(t, tb, 1)
	tb.Forget("s2", "session ended")
	get(t, c)
	if denied.Load() != 2 { // the deny, and s2's prompt at its end
		t.Fatalf("%d denied events", denied.Load())
	}
}

func TestCapPerSession(t *testing.T) {
	tb := New(Config{MaxPerSession: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask(tb, ctx, Question{Session: "s1", Name: "a.test"})
	ask(tb, ctx, Question{Session: "s1", Name: "b.test"})
	waitPending(t, tb, 2)
	if _, err := tb.Ask(ctx, Question{Session: "s1", Name: "c.test"}); !errors.Is(err, ErrCap) {
		t.Fatalf("third prompt: %v", err)
	}
	// The cap is per session.
	ask(tb, ctx, Question{Session: "s2", Name: "c.test"})
	waitPending(t, tb, 3)
	tb.Forget("s1", "session ended")
	tb.Forget("s2", "session ended")
	waitPending(t, tb, 0)
}

func TestTimeout(t *testing.T) {
	tb := New(Config{Timeout: 20 * time.Millisecond, Window: time.Millisecond})
	got := make(chan Event, 4)
	q := Question{Session: "s1", Name: "slow.test", Report: func(e Event) { got <- e }}
	if r := get(t, ask(tb, context.Background(), q)); r.err != nil || r.a.Allow {
		t.Fatalf("timed-out prompt: %+v", r)
	}
	if e := <-got; e.Kind != Asked {
		t.Fatalf("first event %v", e.Kind)
	}
	if e := <-got; e.Kind != TimedOut || e.Prompt.State != "timeout" {
		t.Fatalf("second event %+v", e)
	}
	// A timeout is not a remembered deny: a later question asks again.
	time.Sleep(5 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := tb.Ask(ctx, q); !errors.Is(err, ErrPending) {
		t.Fatalf("asking after a timeout: %v", err)
	}
}

func TestApprovalAfterWaiterLeft(t *testing.T) {
	tb := New(Config{Window: time.Millisecond})
	var applied []Scope
	q := Question{Session: "s1", Name: "late.test", Apply: func(a Answer) error {
		applied = append(applied, a.Scope)
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	c := ask(tb, ctx, q)
	p := waitPending(t, tb, 1)[0]
	cancel()
	if r := get(t, c); !errors.Is(r.err, ErrPending) {
		t.Fatalf("waiter that gave up: %+v", r)
	}
	if len(tb.List()) != 1 {
		t.Fatal("the prompt closed when its waiter left")
	}
	if _, err := tb.Answer(p.ID, Answer{Allow: true, Scope: Once}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// The retry takes the approval, once.
	if a, err := tb.Ask(context.Background(), q); err != nil || !a.Allow {
		t.Fatalf("retry after a late approval: %+v %v", a, err)
	}
	if len(applied) != 1 || applied[0] != Once {
		t.Fatalf("applied %v", applied)
	}
}

func TestApplyFailureKeepsPrompt(t *testing.T) {
	tb := New(Config{})
	q := Question{Session: "s1", Name: "x.test", Apply: func(Answer) error { return errors.New("allowlist not writable") }}
	c := ask(tb, context.Background(), q)
	p := waitPending(t, tb, 1)[0]
	if _, err := tb.Answer(p.ID, Answer{Allow: true, Scope: Always}); err == nil {
		t.Fatal("a failed Apply was accepted")
	}
	if _, ok := tb.Get(p.ID); !ok {
		t.Fatal("a failed approval closed the prompt")
	}
	if _, err := tb.Answer(p.ID, Answer{Allow: true, Scope: "forever"}); err == nil {
		t.Fatal("a bad scope was accepted")
	}
	if _, err := tb.Answer(p.ID, Answer{}); err != nil {
		t.Fatal(err)
	}
	if r := get(t, c); r.a.Allow {
		t.Fatal("denied after a failed approval, yet allowed")
	}
}

func TestSubscribe(t *testing.T) {
	tb := New(Config{})
	ch, cancel := tb.Subscribe()
	defer cancel()
	c := ask(tb, context.Background(), Question{Session: "s1", Name: "sub.test"})
	p := <-ch
	if p.State != "pending" || p.Name != "sub.test" {
		t.Fatalf("stream: %+v", p)
	}
	if _, err := tb.Answer(p.ID, Answer{Allow: true, Scope: ForSession, By: "user:bob"}); err != nil {
		t.Fatal(err)
	}
	if p := <-ch; p.State != "granted" || p.Scope != ForSession || p.By != "user:bob" {
		t.Fatalf("stream: %+v", p)
	}
	get(t, c)
}
