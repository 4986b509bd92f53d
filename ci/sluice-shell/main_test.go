// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestStepLabel(t *testing.T) {
	for in, want := range map[string]string{"": "step", "__run_2": "__run_2", "a b/../c": "a_b_.._c"} {
		if got := stepLabel(in); got != want {
			t.Errorf("stepLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithEnv(t *testing.T) {
	got := withEnv([]string{"A=1", "SLUICE_SOCKET=/evil", "B=2"}, "SLUICE_SOCKET", "/run/x")
	if !slices.Equal(got, []string{"A=1", "B=2", "SLUICE_SOCKET=/run/x"}) {
		t.Errorf("withEnv = %v", got)
	}
}

// A settings file others can write is refused: a step could rewrite it.
func TestReadConfigRefusesAWritableFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c")
	body := "sluice=/usr/local/bin/sluice\nsluice-ci=/usr/local/bin/sluice-ci\nsocket=/s\ndir=/d\nmode=block\n"
	if err := os.WriteFile(p, []byte(body), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := readConfig(p); err == nil {
		t.Error("a world-writable settings file was accepted")
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := readConfig(p)
	if os.Geteuid() != 0 {
		if err == nil {
			t.Error("a settings file not owned by root was accepted")
		}
		return
	}
	if err != nil || cfg["mode"] != "block" || cfg["socket"] != "/s" {
		t.Errorf("readConfig = %v, %v", cfg, err)
	}
	if err := os.WriteFile(p, []byte("sluice=/x\nsluice-ci=/y\nsocket=/s\ndir=/d\nmode=off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readConfig(p); err == nil {
		t.Error("mode=off was accepted")
	}
}
