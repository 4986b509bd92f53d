// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/internal/atomicfile"
	"github.com/sluice-dev/sluice/sessions"
)

// fileStamp identifies a version of the allowlist file cheaply: editors
// replace files (new inode) or rewrite them (new mtime/size).
type fileStamp struct {
	ino   uint64
	size  int64
	mtime time.Time
	ok    bool
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime(), ok: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}

// watchAllowlist polls the allowlist file twice a second: cheap, and it
// follows editors that replace the file as well as those that rewrite it.
func (s *Server) watchAllowlist() {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		st := stampOf(s.cfg.AllowlistPath)
		s.mu.Lock()
		changed := st != s.fileStamp
		s.fileStamp = st
		s.mu.Unlock()
		if changed {
			s.reload(nil)
		}
	}
}

// reload reads the allowlist file and applies it; an invalid file is
// reported and the last good policy stays in force.
func (s *Server) reload(actor *uint32) {
	p, err := loadPolicyFile(s.cfg.AllowlistPath)
	if errors.Is(err, os.ErrNotExist) {
		p, err = allowlist.New(nil)
	}
	if err != nil {
		s.metrics.policy.WithLabelValues("invalid").Inc()
		s.emit(audit.Event{Type: audit.PolicyInvalid, Actor: actor, Reason: err.Error(),
			Message: "allowlist not applied, the last good policy stays in force: " + err.Error()})
		return
	}
	s.apply(p, actor, "reloaded "+s.cfg.AllowlistPath)
}

// apply makes p the machine policy and narrows every session to it.
func (s *Server) apply(p *allowlist.Policy, actor *uint32, what string) {
	// Serialised with a container policy file's reload (containers_linux.go),
	// which changes the requested policy of its sessions.
	s.ctr.applyMu.Lock()
	old := s.machine.Swap(p)
	var errs []error
	for _, ss := range s.snapshot() {
		if err := ss.Enforced().SetPolicy(sessions.Intersect(ss.Requested, p)); err != nil {
			errs = append(errs, err)
		}
		if r := ss.Enforced().Resolver(); r != nil {
			r.Prune()
		}
	}
	s.ctr.applyMu.Unlock()
	s.metrics.policy.WithLabelValues("applied").Inc()
	var entries []string
	for _, e := range p.Entries() {
		entries = append(entries, e.String())
	}
	msg := fmt.Sprintf("machine allowlist %s: %d entries (was %d)", what, p.Len(), old.Len())
	if err := errors.Join(errs...); err != nil {
		msg += "; errors: " + err.Error()
	}
	s.emit(audit.Event{Type: audit.PolicyChanged, Actor: actor, Entries: entries, Message: msg})
}

// writeAllowlist replaces the file atomically and applies it at once (the
// watcher then sees a file it already applied).
func (s *Server) writeAllowlist(p *allowlist.Policy, actor uint32, what string) error {
	dir := filepath.Dir(s.cfg.AllowlistPath)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := atomicfile.Write(s.cfg.AllowlistPath, p.Format(), 0o644, nil); err != nil {
		return fmt.Errorf("replace allowlist: %w", err)
	}
	s.mu.Lock()
	s.fileStamp = stampOf(s.cfg.AllowlistPath)
	s.mu.Unlock()
	s.apply(p, &actor, what)
	return nil
}
