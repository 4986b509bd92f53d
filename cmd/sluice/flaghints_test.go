// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/enforcer"
)

func TestWithFlagHint(t *testing.T) {
	want := enforcer.ErrNoProcessIsolation.Error() + "; pass --share-processes to run it anyway"
	embedded := fmt.Errorf("start: %w", enforcer.ErrNoProcessIsolation)
	if got := withFlagHint(embedded); !strings.HasSuffix(got.Error(), want) || !errors.Is(got, enforcer.ErrNoProcessIsolation) {
		t.Errorf("embedded: %v", got)
	}
	// A daemon's refusal is text by the time it reaches the client.
	daemon := errors.New("daemon: " + enforcer.ErrNoProcessIsolation.Error())
	if got := withFlagHint(daemon); got.Error() != "daemon: "+want {
		t.Errorf("from the daemon: %v", got)
	}
	other := errors.New("something else")
	if got := withFlagHint(other); got != other {
		t.Errorf("an unrelated error changed: %v", got)
	}
	if withFlagHint(nil) != nil {
		t.Error("nil became an error")
	}
}
