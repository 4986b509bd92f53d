// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"slices"
	"testing"
)

const testSelf = "/usr/lib/sluice/sluice"

func TestArgsRoundTrip(t *testing.T) {
	for _, o := range []Options{{}, {ShareProcesses: true}, {AbstractUnix: true}, {ShareProcesses: true, AbstractUnix: true}, {AllowUserNamespaces: true}} {
		o.Path, o.Argv = "/bin/sh", []string{"sh", "--", "-c"}
		args := Args(testSelf, o)
		if args[0] != testSelf || args[1] != Name {
			t.Fatalf("args %q", args)
		}
		got, err := Parse(args[2:])
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		if got.Path != o.Path || got.ShareProcesses != o.ShareProcesses || got.AbstractUnix != o.AbstractUnix || got.AllowUserNamespaces != o.AllowUserNamespaces || !slices.Equal(got.Argv, o.Argv) {
			t.Errorf("%q parsed as %+v", args, got)
		}
	}
	for _, bad := range [][]string{nil, {"--path"}, {"--path", "/x"}, {"--path", "/x", "--"}, {"--", "x"}, {"--path", "/x", "--bogus", "--", "x"}, {"--path", "/x", "--path", "/y", "--", "x"}} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
