// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJudgeHook: the hook's decisions that need no kernel. A guarded
// namespace's container whose pod has no datapath is refused, and so is
// one when the guard copy is malformed (fail closed); sandboxes, exempt
// and unguarded namespaces pass, and so does everything before the agent
// ever ran. The kernel half (a pod with the datapath attached passes) is
// tests/nodee2e's.
func TestJudgeHook(t *testing.T) {
	guard := filepath.Join(t.TempDir(), "node", "namespaces.json")
	o := hookOptions{guardFile: guard, exempt: []string{"kube-system"}}
	ctr := func(ns string) ociState {
		return ociState{ID: "c1", Pid: 1 << 30, Annotations: map[string]string{criNamespace: ns, criPodName: "p", criContainerType: "container"}}
	}
	pins := t.TempDir()
	if err := judgeHook(ctr("agents"), o, pins); err != nil {
		t.Errorf("before the agent ever ran: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(guard), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(guard, []byte(`{"namespaces": {"agents": {}, "*": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := judgeHook(ctr("agents"), o, pins); err == nil || !strings.Contains(err.Error(), "namespace agents is guarded") {
		t.Errorf("a guarded pod with no datapath: %v", err)
	}
	sandbox := ctr("agents")
	sandbox.Annotations[criContainerType] = "sandbox"
	if err := judgeHook(sandbox, o, pins); err != nil {
		t.Errorf("the sandbox: %v", err)
	}
	if err := judgeHook(ctr("kube-system"), o, pins); err != nil {
		t.Errorf("an exempt namespace under a \"*\" guard: %v", err)
	}
	if err := judgeHook(ociState{ID: "x"}, o, pins); err != nil {
		t.Errorf("a container that is no CRI container: %v", err)
	}
	if err := os.WriteFile(guard, []byte(`{"namespaces": {"agents": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := judgeHook(ctr("web"), o, pins); err != nil {
		t.Errorf("an unguarded namespace: %v", err)
	}
	if err := os.WriteFile(guard, []byte(`{"namespaces": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := judgeHook(ctr("web"), o, pins); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a malformed guard copy: %v", err)
	}
}
