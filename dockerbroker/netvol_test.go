// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

const fakeNetID = "aaaa56789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeNetVol is the fake engine's networks and volumes: n1 and v1 once
// created (with the labels the engine got), othernet and theirs already
// there and another session's.
type fakeNetVol struct {
	mu                  sync.Mutex
	netLabels           map[string]any
	vols                map[string]map[string]any
	listed              []string // the filters of the lists the engine got
	removed             []string // what the engine removed
	connected           []string // connect bodies
	netCreated, volMade int
}

// serve answers the networks' and volumes' endpoints; false for the rest.
func (f *fakeNetVol) serve(w http.ResponseWriter, r *http.Request, p string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	theirs := map[string]any{SessionLabel: "run-2"}
	switch {
	case r.Method == "POST" && p == "/networks/create":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		f.netLabels, _ = m["Labels"].(map[string]any)
		f.netCreated++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"Id":%q,"Warning":""}`, fakeNetID)
	case r.Method == "GET" && (p == "/networks/n1" || p == "/networks/"+fakeNetID) && f.netLabels != nil:
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": fakeNetID, "Name": "n1", "Labels": f.netLabels})
	case r.Method == "GET" && p == "/networks/othernet":
		_ = json.NewEncoder(w).Encode(map[string]any{"Id": strings.Repeat("b", 64), "Name": "othernet", "Labels": theirs})
	case r.Method == "POST" && p == "/networks/"+fakeNetID+"/connect":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		f.connected = append(f.connected, fmt.Sprint(m["Container"]))
		w.WriteHeader(http.StatusOK)
	case r.Method == "POST" && p == "/volumes/create":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		name := fmt.Sprint(m["Name"])
		if f.vols == nil {
			f.vols = map[string]map[string]any{}
		}
		if _, ok := f.vols[name]; !ok {
			l, _ := m["Labels"].(map[string]any)
			f.vols[name] = l
		}
		f.volMade++
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": name, "Driver": "local", "Labels": f.vols[name]})
	case r.Method == "GET" && p == "/volumes/theirs":
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": "theirs", "Labels": theirs})
	case r.Method == "GET" && strings.HasPrefix(p, "/volumes/") && f.vols[strings.TrimPrefix(p, "/volumes/")] != nil:
		n := strings.TrimPrefix(p, "/volumes/")
		_ = json.NewEncoder(w).Encode(map[string]any{"Name": n, "Labels": f.vols[n]})
	case r.Method == "GET" && (p == "/networks" || p == "/volumes"):
		f.listed = append(f.listed, p+" "+r.URL.Query().Get("filters"))
		fmt.Fprint(w, "[]")
	case r.Method == "DELETE" && (strings.HasPrefix(p, "/networks/") || strings.HasPrefix(p, "/volumes/")):
		f.removed = append(f.removed, p)
		w.WriteHeader(http.StatusNoContent)
	default:
		return false
	}
	return true
}

// do sends a request to the broker and returns its status and message.
func do(t *testing.T, c *http.Client, method, path, body string) (int, string) {
	t.Helper()
	r, _ := http.NewRequest(method, "http://docker"+path, strings.NewReader(body))
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Message string }
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m.Message
}

func TestBrokerNetworksAndVolumes(t *testing.T) {
	c, _, b, fe := start(t)
	nv := &fakeNetVol{}
	fe.netvol = nv
	if st, msg := do(t, c, "POST", "/v1.47/networks/create", `{"Name":"n1","Driver":"bridge"}`); st != http.StatusCreated {
		t.Fatalf("network create: %d %s", st, msg)
	}
	if st, msg := do(t, c, "POST", "/v1.47/volumes/create", `{"Name":"v1"}`); st != http.StatusCreated {
		t.Fatalf("volume create: %d %s", st, msg)
	}
	nv.mu.Lock()
	if nv.netLabels[SessionLabel] != "run-1" || nv.vols["v1"][SessionLabel] != "run-1" {
		t.Errorf("labels the engine got: network %v, volume %v", nv.netLabels, nv.vols["v1"])
	}
	nv.mu.Unlock()
	if got := b.Networks(); len(got) != 1 || got[0] != fakeNetID {
		t.Errorf("networks: %v", got)
	}
	if got := b.Volumes(); len(got) != 1 || got[0] != "v1" {
		t.Errorf("volumes: %v", got)
	}
	// The session's own: inspect, a container on n1 with v1, connect.
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1.47/networks/n1", ""},
		{"GET", "/v1.47/volumes/v1", ""},
		{"POST", "/v1.47/containers/create", `{"Image":"x","HostConfig":{"NetworkMode":"n1","Binds":["v1:/data"]},"NetworkingConfig":{"EndpointsConfig":{"n1":{"Aliases":["a"]}}}}`},
		{"POST", "/v1.47/networks/n1/connect", `{"Container":"agent"}`},
	} {
		if st, msg := do(t, c, req.method, req.path, req.body); st/100 != 2 {
			t.Errorf("%s %s: %d %s, want it passed", req.method, req.path, st, msg)
		}
	}
	nv.mu.Lock()
	if len(nv.connected) != 1 || nv.connected[0] != fakeID {
		t.Errorf("connect: the engine got %v, want the container's full id", nv.connected)
	}
	nv.mu.Unlock()
	// Another's, and what touches the machine.
	for _, req := range []struct{ method, path, body, want string }{
		{"POST", "/v1.47/volumes/create", `{"Name":"theirs"}`, "the volume theirs exists and is not this session's"},
		{"POST", "/v1.47/volumes/create", `{"Name":"v2","DriverOpts":{"device":"/dev/sda"}}`, "--opt"},
		{"DELETE", "/v1.47/volumes/theirs", "", "theirs is not a volume of this session"},
		{"GET", "/v1.47/networks/othernet", "", "othernet is not a network of this session"},
		{"DELETE", "/v1.47/networks/othernet", "", "othernet is not a network of this session"},
		{"POST", "/v1.47/networks/othernet/connect", `{"Container":"agent"}`, "othernet is not a network of this session"},
		{"POST", "/v1.47/networks/n1/connect", `{"Container":"other"}`, "other is not a container of this session"},
		{"POST", "/v1.47/networks/n1/connect", `{"Container":"agent","container":"other"}`, "repeated key"},
		{"POST", "/v1.47/networks/n1/connect", `{"Container":"agent","EndpointConfig":{"IPAMConfig":{"IPv4Address":"172.30.0.9"}}}`, "fixed addresses"},
		{"POST", "/v1.47/networks/create", `{"Name":"n2","Options":{"com.docker.network.bridge.name":"eth0"}}`, "--opt com.docker.network.bridge.name"},
		{"POST", "/v1.47/networks/create", `{"Name":"n2","IPAM":{"Config":[{"Subnet":"10.0.0.0/8"}]}}`, "--subnet"},
		{"POST", "/v1.47/containers/create", `{"HostConfig":{"NetworkMode":"othernet"}}`, "--network othernet"},
		{"POST", "/v1.47/containers/create", `{"HostConfig":{"Binds":["theirs:/d"]}}`, "the volume theirs is not this session's"},
		{"POST", "/v1.47/networks/prune", "", "not an endpoint sluice judges"},
		{"POST", "/v1.47/volumes/prune", "", "not an endpoint sluice judges"},
	} {
		st, msg := do(t, c, req.method, req.path, req.body)
		if st/100 != 4 || !strings.HasPrefix(msg, "sluice: refused ") || !strings.Contains(msg, req.want) {
			t.Errorf("%s %s %s: %d %q, want a refusal saying %q", req.method, req.path, req.body, st, msg, req.want)
		}
	}
	if got := b.Volumes(); len(got) != 1 {
		t.Errorf("volumes after the refusals: %v", got)
	}
	// A name the engine does not know is not found, as the engine says
	// it (compose asks before it creates), and not forwarded.
	for _, path := range []string{"/v1.47/networks/proj_default", "/v1.47/volumes/proj_data"} {
		for _, method := range []string{"GET", "DELETE"} {
			if st, msg := do(t, c, method, path, ""); st != http.StatusNotFound || strings.HasPrefix(msg, "sluice: refused") {
				t.Errorf("%s %s: %d %q, want 404 not found", method, path, st, msg)
			}
		}
	}
	// Lists are filtered by the session's label, beside the client's own filters.
	do(t, c, "GET", `/v1.47/networks?filters={"name":{"n":true}}`, "")
	do(t, c, "GET", "/v1.47/volumes", "")
	nv.mu.Lock()
	listed := nv.listed
	nv.mu.Unlock()
	if len(listed) != 2 || !strings.Contains(listed[0], `"label":["sluice.session=run-1"]`) || !strings.Contains(listed[0], `"name":["n"]`) ||
		!strings.Contains(listed[1], `"label":["sluice.session=run-1"]`) {
		t.Errorf("lists: the engine got %q", listed)
	}
	// The end: the container, then the network and the volume.
	if err := b.RemoveAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	nv.mu.Lock()
	removed := nv.removed
	nv.mu.Unlock()
	if want := []string{"/networks/" + fakeNetID, "/volumes/v1"}; strings.Join(removed, " ") != strings.Join(want, " ") || fe.removed != 1 {
		t.Errorf("removed: %v and %d containers, want %v and 1", removed, fe.removed, want)
	}
}
