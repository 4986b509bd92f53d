// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/enforcer"
	"github.com/sluice-dev/sluice/loader"
)

func status(w io.Writer) error {
	if c := client(); c.Available(context.Background()) {
		st, err := c.Status(context.Background())
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "daemon: sluice %s on %s\nallowlist: %s (%d entries)\nsessions: %d\n", st.Version, api.SocketPath(socketFlag), st.Allowlist, st.Entries, st.Sessions)
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("status needs root (it reads the pinned datapath)")
	}
	cfg, err := enforcer.ConfigFromEnv()
	if err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	if !loader.Pinned(cfg.PinDir) {
		fmt.Fprintf(w, "datapath: not loaded (nothing pinned at %s)\n", cfg.PinDir)
	} else {
		fmt.Fprintf(w, "datapath: pinned at %s\n", cfg.PinDir)
	}
	root, err := enforcer.OpenExistingRoot(cfg.CgroupName)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(w, "sessions: none")
		return nil
	}
	if err != nil {
		return err
	}
	sessions, err := root.Sessions()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sessions: %d (cgroup %s)\n", len(sessions), root.Path())
	for _, s := range sessions {
		procs, _ := s.Procs()
		c, err := loader.PinnedCounters(cfg.PinDir, s.ID())
		if err != nil {
			fmt.Fprintf(w, "  %s  %d processes  (no policy: loopback only)\n", s.Name(), len(procs))
			continue
		}
		fmt.Fprintf(w, "  %s  %d processes  allowed %d  denied %d  audited %d\n", s.Name(), len(procs), c.Allowed, c.Denied, c.Audited)
	}
	return nil
}
