// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp

package wfp

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from Build")

const sid = "S-1-5-21-1004336348-1177238915-682003330-1001"

// goldenCases are the filter sets kept in testdata, by file name.
var goldenCases = map[string]Policy{
	"proxy-only":     {UserSID: sid, ProxyPort: 8080},
	"loopback-ports": {UserSID: sid, ProxyPort: 8080, LoopbackPorts: []uint16{5432, 3000, 8080}},
	"all-loopback":   {UserSID: sid, ProxyPort: 8080, LoopbackPorts: []uint16{3000}, AllLoopback: true},
}

func render(fs []Filter) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String())
		b.WriteString("\n")
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	for name, p := range goldenCases {
		t.Run(name, func(t *testing.T) {
			fs, err := Build(p)
			if err != nil {
				t.Fatal(err)
			}
			got := render(fs)
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Build(%+v) differs from %s (go test -update rewrites it):\n%s", p, path, got)
			}
		})
	}
}

// TestInvariants checks what the confinement rests on, for every golden
// case: every filter passes Install's check and names the user; each layer
// has one permit and one block, the permit outweighing the block and
// requiring loopback; the connect permit names the proxy's port unless all
// of loopback is open.
func TestInvariants(t *testing.T) {
	for name, p := range goldenCases {
		fs, err := Build(p)
		if err != nil {
			t.Fatal(err)
		}
		type pair struct{ permit, block *Filter }
		layers := map[string]*pair{}
		for i := range fs {
			f := &fs[i]
			if err := f.check(); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if layers[f.Layer] == nil {
				layers[f.Layer] = &pair{}
			}
			switch f.Action {
			case actionPermit:
				layers[f.Layer].permit = f
			case actionBlock:
				layers[f.Layer].block = f
			}
		}
		if len(layers) != 4 {
			t.Errorf("%s: %d layers, want 4", name, len(layers))
		}
		for layer, lp := range layers {
			if lp.permit == nil || lp.block == nil {
				t.Errorf("%s/%s: want one permit and one block", name, layer)
				continue
			}
			if lp.permit.Weight <= lp.block.Weight {
				t.Errorf("%s/%s: permit weight %d does not outrank block %d", name, layer, lp.permit.Weight, lp.block.Weight)
			}
			if !hasCondition(lp.permit, fieldFlags, flagIsLoopback) {
				t.Errorf("%s/%s: permit does not require loopback", name, layer)
			}
			if len(lp.block.Conditions) != 1 {
				t.Errorf("%s/%s: block has conditions besides the user: %v", name, layer, lp.block.Conditions)
			}
			if strings.Contains(layer, "CONNECT") && !p.AllLoopback {
				if !hasCondition(lp.permit, fieldRemotePort, uint32(p.ProxyPort)) || !hasCondition(lp.permit, fieldProtocol, protocolTCP) {
					t.Errorf("%s/%s: permit does not name TCP and the proxy port %d", name, layer, p.ProxyPort)
				}
			}
		}
	}
}

func hasCondition(f *Filter, field string, v uint32) bool {
	for _, c := range f.Conditions {
		if c.Field == field && c.Value == v {
			return true
		}
	}
	return false
}

func TestBuildErrors(t *testing.T) {
	for _, p := range []Policy{
		{UserSID: sid}, // no proxy port
		{UserSID: sid, ProxyPort: 80, LoopbackPorts: []uint16{0}}, // port 0
		{UserSID: "", ProxyPort: 80},
		{UserSID: "S-1-5-18", ProxyPort: 80},                                     // SYSTEM
		{UserSID: "S-1-1-0", ProxyPort: 80},                                      // Everyone
		{UserSID: "S-1-5-32-544", ProxyPort: 80},                                 // Administrators
		{UserSID: "S-1-5-21-1004336348-1177238915-682003330-500", ProxyPort: 80}, // built-in Administrator
		{UserSID: "S-1-5-21-1-2-3-1001)(A;;0x1;;;WD", ProxyPort: 80},             // SDDL injection
		{UserSID: "s-1-5-21-1-2-3-1001 ", ProxyPort: 80},
	} {
		if _, err := Build(p); err == nil {
			t.Errorf("Build(%+v): no error", p)
		}
	}
}

func TestCheck(t *testing.T) {
	user := Condition{Field: fieldUserID, Match: matchEqual, SDDL: "D:(A;;0x1;;;" + sid + ")"}
	good := Filter{Name: "x", Layer: layerConnectV4, Action: actionBlock, Weight: 2, Conditions: []Condition{user}}
	if err := good.check(); err != nil {
		t.Fatalf("good filter: %v", err)
	}
	bad := map[string]func(*Filter){
		"no name":    func(f *Filter) { f.Name = "" },
		"layer":      func(f *Filter) { f.Layer = "OUTBOUND_TRANSPORT_V4" },
		"action":     func(f *Filter) { f.Action = "callout" },
		"weight":     func(f *Filter) { f.Weight = 16 },
		"no user":    func(f *Filter) { f.Conditions = []Condition{{Field: fieldFlags, Match: matchFlagsAllSet, Value: 1}} },
		"user match": func(f *Filter) { f.Conditions[0].Match = matchFlagsAllSet },
		"user sddl":  func(f *Filter) { f.Conditions[0].SDDL = "" },
		"port 0": func(f *Filter) {
			f.Conditions = append(f.Conditions, Condition{Field: fieldRemotePort, Match: matchEqual})
		},
		"big port": func(f *Filter) {
			f.Conditions = append(f.Conditions, Condition{Field: fieldRemotePort, Match: matchEqual, Value: 70000})
		},
		"big protocol": func(f *Filter) {
			f.Conditions = append(f.Conditions, Condition{Field: fieldProtocol, Match: matchEqual, Value: 300})
		},
		"unknown field": func(f *Filter) {
			f.Conditions = append(f.Conditions, Condition{Field: "ALE_APP_ID", Match: matchEqual})
		},
	}
	for name, mutate := range bad {
		f := good
		f.Conditions = append([]Condition(nil), good.Conditions...)
		mutate(&f)
		if err := f.check(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestInstallElsewhere(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Install changes the machine's filters; not run in tests")
	}
	if c, err := Install(nil); err == nil || c != nil {
		t.Errorf("Install on %s: %v, %v; want an error", runtime.GOOS, c, err)
	}
}
