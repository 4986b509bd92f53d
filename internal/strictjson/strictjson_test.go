// SPDX-License-Identifier: Apache-2.0

package strictjson

import (
	"strings"
	"testing"
)

type strictTarget struct {
	Socket    string   `json:"socket"`
	Upstreams []string `json:"dns_upstreams"`
	Skipped   string   `json:"-"`
	Plain     string
}

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want "" means accepted
	}{
		{"known keys", `{"socket": "/s", "dns_upstreams": ["127.0.0.1:53"], "Plain": "p"}`, ""},
		{"empty object", "{}\n", ""},
		{"unknown key with its line", "{\n  \"socket\": \"/s\",\n  \"dns_upstream\": [\"x\"]\n}", `line 3, column 3: unknown key "dns_upstream"`},
		{"json:\"-\" is no key", `{"Skipped": "x"}`, `line 1, column 2: unknown key "Skipped"`},
		{"case matters", `{"Socket": "/s"}`, `unknown key "Socket"`},
		{"twice", "{\"socket\": \"/a\",\n\"socket\": \"/b\"}", `line 2, column 1: key "socket" given twice`},
		{"wrong type", "{\n\"socket\": 5}", `line 2, column 12: key "socket": want string, not a JSON number`},
		{"syntax", "{\n\"socket\" \"/s\"}", "line 2"},
		{"not an object", `["socket"]`, "want a JSON object"},
		{"trailing text", `{} {}`, "text after the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v strictTarget
			err := Decode([]byte(tc.in), &v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted %q, want an error with %q", tc.in, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
