// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseSimpleFormat(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": ["api.example.com", "*.githubusercontent.com", "203.0.113.5", "2001:db8::/32"]}`)
	want := []Entry{
		{Kind: KindHost, Name: "api.example.com"},
		{Kind: KindWildcard, Name: "githubusercontent.com"},
		{Kind: KindPrefix, Prefix: mustPrefix("203.0.113.5/32")},
		{Kind: KindPrefix, Prefix: mustPrefix("2001:db8::/32")},
	}
	if got := p.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries() = %+v\nwant %+v", got, want)
	}
}

func TestParseRichFormat(t *testing.T) {
	p := mustParse(t, "\uFEFF"+`{
  "allowed_hosts": [
    {"host": "api.example.com", "owner": "provider:example", "allow_private": true},
    {"host": "*.example.org", "allow_private": false},
    {"host": "198.51.100.0/24", "owner": "ops"},
    "plain.example.net"
  ]
}`)
	want := []Entry{
		{Kind: KindHost, Name: "api.example.com", AllowPrivate: true, Owners: []string{"provider:example"}},
		{Kind: KindWildcard, Name: "example.org"},
		{Kind: KindPrefix, Prefix: mustPrefix("198.51.100.0/24"), Owners: []string{"ops"}},
		{Kind: KindHost, Name: "plain.example.net"},
	}
	if got := p.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries() = %+v\nwant %+v", got, want)
	}
}

// TestParseBadEntries checks that every bad entry is reported with its index,
// line and column, and that nothing is applied.
func TestParseBadEntries(t *testing.T) {
	data := `{
  "allowed_hosts": [
    "api.example.com",
    "https://api.example.com/v1",
    "api.example.com:443",
    "*",
      "*.com",
    {"host": "a.*.example.com"},
    {"host": "ok.example.com", "alow_private": true},
    {"owner": "x"},
    {"host": "203.0.113.0/24", "allow_private": true},
    42, "ok.example.net", "300.1.1.1",
    {"host": "ok.example.org", "owner": ""},
    {"host": "ok.example.org", "allow_private": "yes"},
    {"host": "ok.example.org", "host": "twice.example.org"},
    "über.example", "203.0.113.0/33"
  ]
}`
	p, err := Parse([]byte(data))
	if p != nil {
		t.Errorf("got a policy despite errors: %v", p.Entries())
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not an *Error", err)
	}
	want := []struct {
		index, line, col int
		entry, msg       string
	}{
		{1, 4, 5, "https://api.example.com/v1", `give the host name "api.example.com", not a URL`},
		{2, 5, 5, "api.example.com:443", `a port is not part of the host: give "api.example.com"`},
		{3, 6, 5, "*", `lone "*"`},
		{4, 7, 7, "*.com", "too broad"},
		{5, 8, 5, "a.*.example.com", "whole leftmost label"},
		{6, 9, 5, "ok.example.com", `unknown key "alow_private"`},
		{7, 10, 5, `{"owner": "x"}`, `no "host"`},
		{8, 11, 5, "203.0.113.0/24", "allow_private applies to host names only"},
		{9, 12, 5, "42", "must be a string or an object"},
		{11, 12, 27, "300.1.1.1", "invalid IPv4 address"},
		{12, 13, 5, "ok.example.org", "empty owner"},
		{13, 14, 5, "ok.example.org", `"allow_private" must be true or false, not a string`},
		{14, 15, 5, "ok.example.org", `key "host" appears twice`},
		{16, 16, 21, "203.0.113.0/33", "out of range"},
	}
	if len(pe.Problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(pe.Problems), len(want), err)
	}
	for i, w := range want {
		var ee *EntryError
		if !errors.As(pe.Problems[i], &ee) {
			t.Errorf("problem %d (%v) is not an *EntryError", i, pe.Problems[i])
			continue
		}
		if ee.Index != w.index || ee.Line != w.line || ee.Column != w.col || ee.Entry != w.entry {
			t.Errorf("problem %d: index %d line %d col %d entry %q; want %d %d %d %q",
				i, ee.Index, ee.Line, ee.Column, ee.Entry, w.index, w.line, w.col, w.entry)
		}
		if !strings.Contains(ee.Error(), w.msg) {
			t.Errorf("problem %d: %q does not contain %q", i, ee.Error(), w.msg)
		}
	}
	if msg := pe.Problems[0].Error(); msg != `allowed_hosts[1] (line 4, column 5) "https://api.example.com/v1": give the host name "api.example.com", not a URL: the allowlist works on hosts and addresses, not on URLs` {
		t.Errorf("message: %s", msg)
	}
}

func TestParseFileErrors(t *testing.T) {
	tests := []struct {
		name      string
		data      string
		line, col int
		msg       string
	}{
		{"empty", "", 1, 1, "the file is empty"},
		{"blank", " \n\t", 1, 1, "the file is empty"},
		{"bare list", `["api.example.com"]`, 1, 1, "not a bare list"},
		{"string", `"api.example.com"`, 1, 1, "must hold a JSON object"},
		{"unknown key", "{\n  \"allowed_host\": []\n}", 2, 3, `unknown key "allowed_host"`},
		{"wrong case", `{"Allowed_Hosts": []}`, 1, 2, `unknown key "Allowed_Hosts"`},
		{"twice", `{"allowed_hosts": [], "allowed_hosts": ["a.example.com"]}`, 1, 23, `"allowed_hosts" appears twice`},
		{"not a list", `{"allowed_hosts": "api.example.com"}`, 1, 19, `"allowed_hosts" must be a list of entries, not a string`},
		{"syntax", "{\n  \"allowed_hosts\": [\n    \"a.example.com\"\n    \"b.example.com\"\n  ]\n}", 4, 5, "invalid JSON"},
		{"missing colon", "{\n \"allowed_hosts\" []}", 2, 18, "invalid JSON"},
		{"trailing comma", "{\"allowed_hosts\": [\"a.example.com\",]}", 1, 36, "invalid JSON"},
		{"truncated", "{\"allowed_hosts\": [\"a.example.com\"", 1, 34, "unexpected end of JSON input"},
		{"trailing text", "{\"allowed_hosts\": []}\nx", 2, 1, "after top-level value"},
		{"second object", "{} {}", 1, 4, "after top-level value"},
		{"columns count characters", "{\"allowed_hosts\": [\"ü\"] x}", 1, 25, "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.data))
			if p != nil {
				t.Errorf("got a policy: %v", p.Entries())
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v has no *FileError", err)
			}
			if fe.Line != tt.line || fe.Column != tt.col || !strings.Contains(fe.Error(), tt.msg) {
				t.Errorf("got %q at line %d col %d; want %q at line %d col %d", fe, fe.Line, fe.Column, tt.msg, tt.line, tt.col)
			}
		})
	}
}

func TestParseSyntaxErrorWrapsJSONError(t *testing.T) {
	_, err := Parse([]byte(`{"allowed_hosts": [1 2]}`))
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Errorf("error %v does not wrap a *json.SyntaxError", err)
	}
}

func TestParseCollectsEntryAndKeyErrors(t *testing.T) {
	_, err := Parse([]byte(`{"allowed_hosts": ["", "ok.example.com"], "comment": "x"}`))
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Problems) != 2 {
		t.Fatalf("error %v, want 2 problems", err)
	}
	if !strings.Contains(err.Error(), "2 problems") || !strings.Contains(err.Error(), "empty entry") || !strings.Contains(err.Error(), `unknown key "comment"`) {
		t.Errorf("error %q", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "network_allowlist.json")
	if err := os.WriteFile(good, []byte(`{"allowed_hosts": ["api.example.com"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(good)
	if err != nil || p.Len() != 1 {
		t.Fatalf("Load: %v, %v", p, err)
	}

	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"allowed_hosts\": [\n  \"api.example.com:443\"\n]}"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err = Load(bad)
	var ee *EntryError
	if p != nil || !errors.As(err, &ee) || ee.Line != 2 {
		t.Fatalf("Load(bad) = %v, %v", p, err)
	}
	if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %q does not name the file and line", err)
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error %v", err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	p := mustParse(t, `{"allowed_hosts": [
		"API.example.com.",
		{"host": "*.example.org", "owner": "a", "allow_private": true},
		{"host": "*.example.org", "owner": "b"},
		"*.example.org",
		"203.0.113.7/24",
		{"host": "x.example.net", "owner": "quote\"d <&>"}
	]}`)
	wantText := `{
  "allowed_hosts": [
    "api.example.com",
    {"host": "*.example.org", "owner": "a", "allow_private": true},
    {"host": "*.example.org", "owner": "b"},
    "*.example.org",
    "203.0.113.0/24",
    {"host": "x.example.net", "owner": "quote\"d \u003c\u0026\u003e"}
  ]
}
`
	if got := string(p.Format()); got != wantText {
		t.Errorf("Format() =\n%s\nwant\n%s", got, wantText)
	}
	for _, out := range [][]byte{p.Format(), mustMarshal(t, p)} {
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		if !reflect.DeepEqual(q.Entries(), p.Entries()) || string(q.Format()) != string(p.Format()) {
			t.Errorf("round trip changed the policy:\n%s\n%s", p.Format(), q.Format())
		}
	}
}

func mustMarshal(t *testing.T, p *Policy) []byte {
	t.Helper()
	out, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseObjectErrors(t *testing.T) {
	long := strings.Repeat("o", maxOwnerLen+1)
	tests := []struct{ element, entry, msg string }{
		{`{"host": 5}`, `{"host": 5}`, `"host" must be a string, not a number`},
		{`{"host": "a.example.com", "owner": ["x"]}`, "a.example.com", `"owner" must be a string, not a list`},
		{`{"host": "a.example.com", "owner": "` + long + `"}`, "a.example.com", "at most 256"},
		{`{"host": "a.example.com", "owner": "x\u0007"}`, "a.example.com", "control character"},
		{`{"host": "a.example.com", "allow_private": null}`, "a.example.com", "must be true or false, not null"},
		{`{"host": "a.example.com", "Host": "b.example.com"}`, "a.example.com", `unknown key "Host"`},
		{`[` + strings.Repeat(`"x", `, 30) + `"x"]`, `["x", "x", "x", "x", "x", "x", "x", "x", "x", "x", "x", "x",…`, "not a list"},
		{`true`, "true", "not a boolean"},
		{`null`, "null", "not null"},
	}
	for _, tt := range tests {
		t.Run(tt.element, func(t *testing.T) {
			_, err := Parse([]byte(`{"allowed_hosts": [` + tt.element + `]}`))
			var ee *EntryError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v has no *EntryError", err)
			}
			if ee.Entry != tt.entry || !strings.Contains(ee.Error(), tt.msg) || ee.Line != 1 || ee.Column != 20 {
				t.Errorf("got %q (entry %q, line %d col %d); want entry %q and %q at 1:20", ee, ee.Entry, ee.Line, ee.Column, tt.entry, tt.msg)
			}
		})
	}
}
