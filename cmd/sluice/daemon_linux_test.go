// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The packaged configuration file passes the strict reading: the daemon
// starts with what the package installs.
func TestPackagedConfigIsStrict(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := decodeStrict(b, &fc); err != nil {
		t.Fatalf("packaging/sluice.json: %v", err)
	}
	if fc.Socket == "" {
		t.Fatal("packaging/sluice.json: no socket read")
	}
}

// An unknown key in --config stops the daemon before it does anything,
// with the file, the key and its line.
func TestLoadFileConfigRefusesUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sluice.json")
	if err := os.WriteFile(path, []byte("{\n  \"group\": \"sluice\",\n  \"metrics_adr\": \"127.0.0.1:9100\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := loadFileConfig(path, true)
	if err == nil {
		t.Fatalf("accepted, read %+v", fc)
	}
	for _, want := range []string{path, `unknown key "metrics_adr"`, "line 3, column 3", "metrics_addr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if fc.Group != "" {
		t.Errorf("half a configuration came back with the error: %+v", fc)
	}
}
