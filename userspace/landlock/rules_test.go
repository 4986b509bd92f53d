// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		args  []string
		ports []uint16
		argv  []string
		err   string
	}{
		{args: []string{"--", "curl", "-v"}, argv: []string{"curl", "-v"}},
		{args: []string{"--connect-port", "8080", "--connect-port=3000", "--", "sh", "-c", "x"},
			ports: []uint16{8080, 3000}, argv: []string{"sh", "-c", "x"}},
		{args: []string{"--connect-port", "1", "--", "--connect-port"}, ports: []uint16{1}, argv: []string{"--connect-port"}},
		{args: []string{"--connect-port", "8080", "curl"}, err: "unexpected argument"},
		{args: []string{"--connect-port", "8080"}, err: "missing --"},
		{args: []string{"--connect-port"}, err: "needs a port"},
		{args: []string{"--connect-port", "0", "--", "x"}, err: "not a port"},
		{args: []string{"--connect-port", "65536", "--", "x"}, err: "not a port"},
		{args: []string{"--connect-port=-1", "--", "x"}, err: "not a port"},
		{args: []string{"--connect-port", "80"}, err: "missing --"},
		{args: []string{"--"}, err: "no command"},
		{args: nil, err: "missing --"},
	}
	for _, tc := range cases {
		r, argv, err := ParseArgs(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseArgs(%q): error %v, want one containing %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseArgs(%q): %v", tc.args, err)
			continue
		}
		if !slices.Equal(r.ConnectPorts, tc.ports) || !slices.Equal(argv, tc.argv) {
			t.Errorf("ParseArgs(%q) = %v, %q; want %v, %q", tc.args, r.ConnectPorts, argv, tc.ports, tc.argv)
		}
	}
}

func TestArgsRoundTrip(t *testing.T) {
	in := Rules{ConnectPorts: []uint16{8080, 1, 65535}}
	r, argv, err := ParseArgs(append(in.Args(), "--", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.ConnectPorts, in.ConnectPorts) || !slices.Equal(argv, []string{"true"}) {
		t.Errorf("round trip: %v %q", r.ConnectPorts, argv)
	}
}

func TestPorts(t *testing.T) {
	got, err := Rules{ConnectPorts: []uint16{443, 80, 443}}.ports()
	if err != nil || !slices.Equal(got, []uint16{80, 443}) {
		t.Errorf("ports() = %v, %v; want [80 443]", got, err)
	}
	if _, err := (Rules{ConnectPorts: []uint16{80, 0}}).ports(); err == nil {
		t.Error("port 0: no error")
	}
	if got, err := (Rules{}).ports(); err != nil || len(got) != 0 {
		t.Errorf("no ports: %v, %v", got, err)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "data")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()

	if got, err := lookPath("tool", []string{"HOME=/", "PATH=" + other + ":" + dir}); err != nil || got != exe {
		t.Errorf("on PATH: %q, %v", got, err)
	}
	if got, err := lookPath(exe, nil); err != nil || got != exe {
		t.Errorf("with a slash: %q, %v", got, err)
	}
	// The command's PATH counts, not the shim's: the first PATH wins, as
	// with getenv.
	if _, err := lookPath("tool", []string{"PATH=" + other, "PATH=" + dir}); err == nil {
		t.Error("found via a second PATH entry")
	}
	if _, err := lookPath("data", []string{"PATH=" + dir}); err == nil {
		t.Error("found a file without an execute bit")
	}
	if _, err := lookPath(plain, nil); err == nil {
		t.Error("accepted a non-executable path")
	}
	if _, err := lookPath("", nil); err == nil {
		t.Error("accepted an empty name")
	}
	// Relative and empty PATH entries are skipped.
	t.Chdir(dir)
	if _, err := lookPath("tool", []string{"PATH=:."}); err == nil {
		t.Error("found a command through the current directory")
	}
}
