// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

func runChecks() []checkResult {
	return []checkResult{{name: "kernel enforcement", status: checkFail, detail: "only available on Linux",
		fix: "use the proxy mode on this platform"}}
}
