// SPDX-License-Identifier: Apache-2.0

//go:build linux && !amd64

package main

import "errors"

// injectSendto is written for amd64 only.
func injectSendto(int, [4]byte, uint16) (int, error) {
	return 0, errors.New("ptrace-inject: only on amd64")
}
