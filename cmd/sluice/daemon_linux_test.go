// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/strictjson"
)

// The packaged configuration file passes the strict reading: the daemon
// starts with what the package installs.
func TestPackagedConfigIsStrict(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fc fileConfig
	if err := strictjson.Decode(b, &fc); err != nil {
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

// container_policies is read as a map of names to files; a misspelt key
// ("container_policy") or a value of the wrong type is refused with its
// line, never ignored (the containers would get the machine allowlist).
func TestLoadFileConfigContainerPolicies(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		path := filepath.Join(dir, "sluice.json")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	fc, err := loadFileConfig(write("{\n  \"container_policies\": {\"web\": \"/etc/sluice/web.json\", \"ci\": \"/etc/sluice/ci.json\"}\n}\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.ContainerPolicies) != 2 || fc.ContainerPolicies["web"] != "/etc/sluice/web.json" {
		t.Errorf("container_policies read as %v", fc.ContainerPolicies)
	}
	for body, want := range map[string][]string{
		"{\n  \"container_policy\": {\"web\": \"/w.json\"}\n}\n":       {`unknown key "container_policy"`, "line 2, column 3", "container_policies"},
		"{\n  \"container_policies\": [\"/etc/sluice/web.json\"]\n}\n": {`key "container_policies"`, "line 2"},
		"{\n  \"container_policies\": {\"web\": 7}\n}\n":               {`container_policies`, "line 2"},
	} {
		_, err := loadFileConfig(write(body), true)
		if err == nil {
			t.Errorf("%q accepted", body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", body, err, w)
			}
		}
	}
}
