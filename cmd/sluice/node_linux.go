// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/internal/atomicfile"
	"github.com/sluice-dev/sluice/nriplugin"
)

// startNode installs the hook's binary and starts the NRI plugin beside
// the daemon's server (serveDaemon). The plugin reconnects on its own
// whenever the runtime restarts.
func startNode(ctx context.Context, cmd *cobra.Command, pods nriplugin.Pods, n nodeOptions) error {
	if n.hookDir != "" {
		if err := installSelf(n.hookDir); err != nil {
			return err
		}
	}
	logw := cmd.ErrOrStderr()
	go func() {
		_ = nriplugin.Run(ctx, pods, nriplugin.Options{Socket: n.nriSocket,
			Logf: func(format string, args ...any) { fmt.Fprintf(logw, "sluice node: "+format+"\n", args...) }})
	}()
	fmt.Fprintf(logw, "sluice node: NRI plugin on %s, pod policies %s\n", n.nriSocket, n.policies)
	return nil
}

// installSelf copies the running binary to dir/sluice atomically, so the
// runtime's hook (a host path) runs the agent's own version.
func installSelf(dir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("hook binary: %w", err)
	}
	src, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("hook binary: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hook directory: %w", err)
	}
	dst := filepath.Join(dir, "sluice")
	if same(exe, dst) {
		return nil
	}
	if err := atomicfile.Write(dst, nil, 0o755, func(f *os.File) error {
		_, err := io.Copy(f, src)
		return err
	}); err != nil {
		return fmt.Errorf("install the hook binary at %s: %w", dst, err)
	}
	return nil
}

func same(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
