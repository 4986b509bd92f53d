// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/dnsresolver"
	"github.com/sluice-dev/sluice/enforcer"
)

// flagHints name the flag that answers a library's error. The libraries
// say what is wrong in their own terms (a daemon session's request has no
// flags, only JSON fields); the command line, which knows its flags, adds
// which one to pass.
var flagHints = []struct {
	err  error
	hint string
}{
	{enforcer.ErrNoProcessIsolation, "pass --share-processes to run it anyway"},
	{dnsresolver.ErrNoUpstream, "pass --dns-upstream ADDR[:PORT]"},
}

// withFlagHint returns err with the hint of the first library error it
// is, or that it quotes: an error the daemon sent back arrives as text
// ("daemon: ..."), and the sentinel's text is the same at both ends.
func withFlagHint(err error) error {
	if err == nil {
		return nil
	}
	for _, h := range flagHints {
		if errors.Is(err, h.err) || strings.Contains(err.Error(), h.err.Error()) {
			return fmt.Errorf("%w; %s", err, h.hint)
		}
	}
	return err
}
