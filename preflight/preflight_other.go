// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package preflight

// Run is the one check there is off Linux: kernel enforcement needs
// Linux's cgroup BPF.
func Run(Options) []Result {
	return []Result{{Name: "kernel enforcement", Status: Fail, Detail: "only available on Linux",
		Fix: "use the proxy mode on this platform"}}
}
