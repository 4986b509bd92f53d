// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/cgroups"
	"github.com/sluice-dev/sluice/loader"
	"github.com/sluice-dev/sluice/podpolicy"
)

// ociState is the part of the OCI runtime state a hook reads on stdin.
type ociState struct {
	ID          string            `json:"id"`
	Pid         int               `json:"pid"`
	Annotations map[string]string `json:"annotations"`
}

// The annotations containerd's CRI puts on every container's spec.
const (
	criContainerType = "io.kubernetes.cri.container-type"
	criNamespace     = "io.kubernetes.cri.sandbox-namespace"
	criPodName       = "io.kubernetes.cri.sandbox-name"
)

func runNodeHook(cmd *cobra.Command, o hookOptions) error {
	b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 1<<20))
	if err != nil {
		return fmt.Errorf("hook: read the OCI state: %w", err)
	}
	var st ociState
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("hook: the OCI state on standard input: %w", err)
	}
	ecfg, err := instanceConfig("")
	if err != nil {
		return err
	}
	if err := judgeHook(st, o, ecfg.WithDefaults().PinDir); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "sluice node hook:", err)
		return err
	}
	return nil
}

// judgeHook is the hook's decision: nil lets the container run.
func judgeHook(st ociState, o hookOptions, pinDir string) error {
	ns := st.Annotations[criNamespace]
	if st.Annotations[criContainerType] == "sandbox" || ns == "" || slices.Contains(o.exempt, ns) {
		return nil
	}
	b, err := os.ReadFile(o.guardFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil // the agent never ran on this node: nothing is guarded yet
	}
	if err != nil {
		return fmt.Errorf("container %s of pod %s/%s refused: the guard cannot be read: %w", st.ID, ns, st.Annotations[criPodName], err)
	}
	g, err := podpolicy.ParseGuard(b)
	if err != nil {
		return fmt.Errorf("container %s of pod %s/%s refused: the guard copy is malformed: %w", st.ID, ns, st.Annotations[criPodName], err)
	}
	if !g.Guards(ns) {
		return nil
	}
	id, err := podCgroupID(st.Pid)
	if err == nil && loader.AttachedAtPinned(pinDir, id) {
		return nil
	}
	why := "its pod's cgroup has no sluice datapath (is `sluice node` running on this node?)"
	if err != nil {
		why = err.Error()
	}
	return fmt.Errorf("container %s of pod %s/%s refused: namespace %s is guarded and %s", st.ID, ns, st.Annotations[criPodName], ns, why)
}

// podCgroupID is the id of the pod cgroup of the container whose first
// process is pid: the parent of the process's cgroup2 cgroup.
func podCgroupID(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, fmt.Errorf("the OCI state names no process")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return 0, fmt.Errorf("the container's cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			mount, err := cgroups.Mount()
			if err != nil {
				return 0, err
			}
			return cgroups.IDOf(filepath.Join(mount, filepath.Dir(rest)))
		}
	}
	return 0, fmt.Errorf("process %d is in no cgroup2 cgroup", pid)
}
