// SPDX-License-Identifier: Apache-2.0

package world

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ReadAuditLog parses a sluice audit log (JSON lines) and fails the test
// unless every line matches docs/audit.schema.json, the format the
// documentation promises.
func ReadAuditLog(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	schema, err := auditSchema()
	if err != nil {
		t.Fatalf("docs/audit.schema.json: %v", err)
	}
	var evs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Fatalf("audit line does not match docs/audit.schema.json: %s\n%v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339Nano, e["time"].(string)); err != nil {
			t.Fatalf("audit line with a bad time: %s", sc.Text())
		}
		evs = append(evs, e)
	}
	return evs
}

var schemaOnce struct {
	sync.Once
	s   *jsonschema.Schema
	err error
}

// auditSchema compiles docs/audit.schema.json, found from this file's
// place in the module.
func auditSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		_, here, _, ok := runtime.Caller(0)
		if !ok {
			schemaOnce.err = fmt.Errorf("cannot locate the module")
			return
		}
		path := filepath.Join(filepath.Dir(here), "..", "..", "docs", "audit.schema.json")
		b, err := os.ReadFile(path)
		if err != nil {
			schemaOnce.err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemaOnce.err = err
			return
		}
		c := jsonschema.NewCompiler()
		if schemaOnce.err = c.AddResource(path, doc); schemaOnce.err == nil {
			schemaOnce.s, schemaOnce.err = c.Compile(path)
		}
	})
	return schemaOnce.s, schemaOnce.err
}
