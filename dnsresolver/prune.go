package dnsresolver

// Prune forgets the learned addresses none of whose names the current
// policy allows any more, and empties the cache: after a policy change,
// new connects to a removed host fail at once instead of at the TTL's end.
func (r *Resolver) Prune() {
	p := r.policy.Load()
	r.learned.mu.Lock()
	for a, e := range r.learned.addrs {
		keep := false
		for n := range e.names {
			if _, ok := p.MatchName(n); ok {
				keep = true
			} else {
				delete(e.names, n)
				delete(r.learned.perName, n)
			}
		}
		if keep {
			continue
		}
		if r.cfg.Learner != nil && r.cfg.Learner.Forget(a) != nil {
			continue
		}
		delete(r.learned.addrs, a)
	}
	r.learned.mu.Unlock()
	r.cache.mu.Lock()
	clear(r.cache.m)
	r.cache.mu.Unlock()
}
