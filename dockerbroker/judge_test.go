// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"encoding/json"
	"strings"
	"testing"
)

func scope() Scope {
	return Scope{Session: "run-1-abc", Workspace: "/home/u/proj", CgroupParent: "/sluice",
		Owns:        func(ref string) bool { return ref == "mine" },
		OwnsNetwork: func(ref string) bool { return ref == "n1" },
		OwnsVolume:  func(name string) bool { return name == "v1" },
		Sockets:     []string{"/var/run/docker.sock", "/run/sluice/docker/x.sock"}}
}

// guarded is scope with hidden paths inside the workspace.
func guarded() Scope {
	s := scope()
	s.Guarded = func() ([]string, error) { return []string{"/home/u/proj/.env", "/home/u/proj/secrets"}, nil }
	return s
}

func TestJudgeCreateRefuses(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"HostConfig":{"Privileged":true}}`, "--privileged"},
		{`{"HostConfig":{"CapAdd":["SYS_ADMIN"]}}`, "--cap-add SYS_ADMIN"},
		{`{"HostConfig":{"CapAdd":["ALL"]}}`, "--cap-add ALL"},
		{`{"HostConfig":{"NetworkMode":"host"}}`, "--network host"},
		{`{"HostConfig":{"NetworkMode":"container:other"}}`, "not a container of this session"},
		{`{"HostConfig":{"NetworkMode":"somenet"}}`, "--network somenet"},
		{`{"HostConfig":{"PidMode":"host"}}`, "--pid host"},
		{`{"HostConfig":{"IpcMode":"host"}}`, "--ipc host"},
		{`{"HostConfig":{"UTSMode":"host"}}`, "--uts host"},
		{`{"HostConfig":{"UsernsMode":"host"}}`, "--userns host"},
		{`{"HostConfig":{"PidMode":"container:other"}}`, "--pid container:other"},
		{`{"HostConfig":{"Devices":[{"PathOnHost":"/dev/sda"}]}}`, "--device"},
		{`{"HostConfig":{"SecurityOpt":["seccomp=unconfined"]}}`, "--security-opt seccomp=unconfined"},
		{`{"HostConfig":{"SecurityOpt":["apparmor=unconfined"]}}`, "--security-opt apparmor=unconfined"},
		{`{"HostConfig":{"SecurityOpt":["label=disable"]}}`, "--security-opt label=disable"},
		{`{"HostConfig":{"Sysctls":{"net.ipv4.ip_forward":"1"}}}`, "--sysctl"},
		{`{"HostConfig":{"Binds":["/:/host"]}}`, "-v /:/host: only paths within"},
		{`{"HostConfig":{"Binds":["/var/run/docker.sock:/var/run/docker.sock"]}}`, "the Docker socket"},
		{`{"HostConfig":{"Binds":["/home/u/proj/docker.sock:/s"]}}`, "the Docker socket"},
		{`{"HostConfig":{"Binds":["/home/u/project2:/p"]}}`, "only paths within"},
		{`{"HostConfig":{"Binds":["/home/u/proj/../../..:/p"]}}`, "only paths within"},
		{`{"HostConfig":{"Binds":["vol:/p"]}}`, "the volume vol is not this session's"},
		{`{"HostConfig":{"Mounts":[{"Type":"volume","Source":"vol","Target":"/p"}]}}`, "--mount source=vol: the volume is not this session's"},
		{`{"HostConfig":{"Mounts":[{"Type":"volume","Source":"v1","Target":"/p","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"device":"/etc"}}}}]}}`, "volume-opt"},
		{`{"HostConfig":{"Mounts":[{"Type":"bind","Source":"v1","Target":"/p"}]}}`, "a bind's source is a host path"},
		{`{"HostConfig":{"NetworkMode":"n2"}}`, "--network n2: only the default network, none and the session's own"},
		{`{"HostConfig":{"NetworkMode":"n1"},"NetworkingConfig":{"EndpointsConfig":{"n1":{"IPAMConfig":{"IPv4Address":"10.0.0.9"}}}}}`, "fixed addresses"},
		{`{"HostConfig":{"NetworkMode":"n1"},"NetworkingConfig":{"EndpointsConfig":{"n1":{"DriverOpts":{"com.docker.network.endpoint.sysctls":"x"}}}}}`, "driver options of the endpoint"},
		{`{"HostConfig":{"NetworkMode":"n1"},"NetworkingConfig":{"EndpointsConfig":{"n1":{},"n2":{}}}}`, "the network n2"},
		{`{"HostConfig":{"Mounts":[{"Type":"bind","Source":"/etc","Target":"/e"}]}}`, "only paths within"},
		{`{"HostConfig":{"Mounts":[{"Type":"npipe","Source":"x","Target":"/e"}]}}`, "type=npipe"},
		{`{"HostConfig":{"CgroupParent":"/"}}`, "--cgroup-parent"},
		{`{"HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"8080"}]}}}`, "--publish"},
		{`{"HostConfig":{"VolumesFrom":["other"]}}`, "--volumes-from"},
		{`{"HostConfig":{"Runtime":"kata"}}`, "--runtime"},
		{`{"Labels":{"sluice.session":"other"}}`, "the label sluice.session"},
		{`not json`, "not JSON"},
		{`{"HostConfig":{"MaskedPaths":[]}}`, "MaskedPaths"},
		{`{"HostConfig":{"ReadonlyPaths":[]}}`, "MaskedPaths and ReadonlyPaths"},
		{`{"HostConfig":{"Cgroup":"container:x"}}`, "--cgroup"},
		{`{"HostConfig":{"NetworkMode":"none"},"NetworkingConfig":{"EndpointsConfig":{"othernet":{}}}}`, "the network othernet"},
		{`{"HostConfig":{"Binds":["/home/u/proj:/p"]}}`, "it would show /home/u/proj/.env"},
		{`{"HostConfig":{"Binds":["/home/u/proj/secrets/key:/k"]}}`, "it would show /home/u/proj/secrets"},
		{`{"HostConfig":{"LogConfig":{"Type":"syslog","Config":{"syslog-address":"udp://203.0.113.9:514"}}}}`, "--log-driver syslog"},
		{`{"HostConfig":{"LogConfig":{"Type":"gelf"}}}`, "--log-driver gelf"},
		{`{"HostConfig":{"Mounts":[{"Type":"volume","Target":"/e","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"type":"none","o":"bind","device":"/etc"}}}}]}}`, "volume-opt"},
		{`{"HostConfig":{"Mounts":[{"Type":"volume","Target":"/e","VolumeOptions":{"DriverConfig":{"Name":"sshfs"}}}]}}`, "volume-driver=sshfs"},
		{`{"HostConfig":{"Mounts":[{"Type":"image","Source":"x","Target":"/e"}]}}`, "type=image"},
	} {
		_, r := JudgeCreate([]byte(c.body), guarded())
		if r == nil {
			t.Errorf("%s: passed, want refused (%s)", c.body, c.want)
			continue
		}
		if !strings.Contains(r.Error(), c.want) || !strings.HasPrefix(r.Error(), "sluice: refused container create: ") {
			t.Errorf("%s: %q, want it to say %q", c.body, r.Error(), c.want)
		}
	}
}

func TestJudgeCreatePasses(t *testing.T) {
	body := `{"Image":"x","Labels":{"a":"b"},"NetworkingConfig":{"EndpointsConfig":{"none":{}}},"HostConfig":{"Memory":9007199254740993,"CapAdd":["NET_BIND_SERVICE","cap_chown"],
		"NetworkMode":"container:mine","SecurityOpt":["no-new-privileges"],"MaskedPaths":null,"Binds":["/home/u/proj:/src","/home/u/proj/sub:/sub:ro"],
		"Mounts":[{"Type":"tmpfs","Target":"/t"},{"Type":"volume","Target":"/v"},{"Type":"volume","Source":"v1","Target":"/w","VolumeOptions":{"DriverConfig":{"Name":"local"}}}],
		"LogConfig":{"Type":"json-file","Config":{"max-size":"10m"}}}}`
	out, r := JudgeCreate([]byte(body), scope())
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	var m struct {
		Image      string
		Labels     map[string]string
		HostConfig map[string]json.RawMessage
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Image != "x" || m.Labels["a"] != "b" || m.Labels[SessionLabel] != "run-1-abc" {
		t.Errorf("labels or fields lost: %s", out)
	}
	if string(m.HostConfig["CgroupParent"]) != `"/sluice"` || string(m.HostConfig["Memory"]) != "9007199254740993" {
		t.Errorf("host config: %s", out)
	}
}

func TestJudgeCreateNoWorkspace(t *testing.T) {
	s := scope()
	s.Workspace = "/"
	if _, r := JudgeCreate([]byte(`{"HostConfig":{"Binds":["/etc:/e"]}}`), s); r == nil || !strings.Contains(r.Why, "no workspace") {
		t.Errorf("a bind with / as the workspace: %v", r)
	}
}

func TestJudgeCreateSymlinkOut(t *testing.T) {
	s := scope()
	s.Resolve = func(p string) (string, error) {
		if p == "/home/u/proj/link" {
			return "/", nil
		}
		return p, nil
	}
	if _, r := JudgeCreate([]byte(`{"HostConfig":{"Binds":["/home/u/proj/link:/h"]}}`), s); r == nil {
		t.Error("a symbolic link in the workspace to / passed")
	}
}

func TestJudgeExec(t *testing.T) {
	if JudgeExec([]byte(`{"Privileged":true,"Cmd":["sh"]}`)) == nil {
		t.Error("a privileged exec passed")
	}
	if r := JudgeExec([]byte(`{"Cmd":["sh"]}`)); r != nil {
		t.Errorf("an exec refused: %v", r)
	}
}

func TestRegistryHost(t *testing.T) {
	for ref, want := range map[string]string{
		"busybox":                    "registry-1.docker.io",
		"library/busybox":            "registry-1.docker.io",
		"docker.io/library/busybox":  "registry-1.docker.io",
		"ghcr.io/o/i":                "ghcr.io",
		"localhost:5000/i":           "localhost:5000",
		"localhost/i":                "localhost",
		"registry.denied.test:443/i": "registry.denied.test:443",
	} {
		if got := RegistryHost(ref); got != want {
			t.Errorf("RegistryHost(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestRoute(t *testing.T) {
	for _, c := range []struct {
		method, path string
		ep           Endpoint
		ref          string
	}{
		{"HEAD", "/_ping", Pass, ""},
		{"GET", "/v1.43/version", Pass, ""},
		{"GET", "/v1.43/info", Pass, ""},
		{"POST", "/v1.43/containers/create", Create, ""},
		{"GET", "/v1.43/containers/json", List, ""},
		{"POST", "/v1.43/containers/abc/start", Own, "abc"},
		{"POST", "/v1.43/containers/abc/attach", Own, "abc"},
		{"GET", "/v1.43/containers/abc/json", Own, "abc"},
		{"DELETE", "/v1.43/containers/abc", Own, "abc"},
		{"POST", "/v1.43/containers/abc/exec", OwnExec, "abc"},
		{"POST", "/v1.43/exec/e1/start", ExecOwn, "e1"},
		{"POST", "/v1.43/images/create", Pull, ""},
		{"POST", "/v1.43/images/x%2Fy/push", Push, "x%2Fy"},
		{"POST", "/v1.43/build", Build, ""},
		{"POST", "/v1.43/containers/prune", Refused, "prune"},
		{"POST", "/v1.43/swarm/init", Refused, ""},
		{"GET", "/v1.43/events", Refused, ""},
		{"POST", "/v1.43/plugins/pull", Refused, ""},
		{"POST", "/v1.43/containers/abc/update", Refused, "abc"},
		{"POST", "/v1.43/containers/abc/commit", Refused, "abc"},
		{"POST", "/v1.43/networks/create", NetCreate, ""},
		{"GET", "/v1.43/networks", NetList, ""},
		{"GET", "/v1.43/networks/n1", NetOwn, "n1"},
		{"DELETE", "/v1.43/networks/n1", NetOwn, "n1"},
		{"POST", "/v1.43/networks/n1/connect", NetConnect, "n1"},
		{"POST", "/v1.43/networks/n1/disconnect", NetConnect, "n1"},
		{"POST", "/v1.43/networks/prune", Refused, "prune"},
		{"POST", "/v1.43/volumes/create", VolCreate, ""},
		{"GET", "/v1.43/volumes", VolList, ""},
		{"GET", "/v1.43/volumes/v1", VolOwn, "v1"},
		{"DELETE", "/v1.43/volumes/v1", VolOwn, "v1"},
		{"POST", "/v1.43/volumes/prune", Refused, "prune"},
		{"PUT", "/v1.43/volumes/v1", Refused, "v1"},
		{"GET", "/v1.43/networksx", Refused, ""},
	} {
		ep, ref := Route(c.method, c.path)
		if ep != c.ep || ref != c.ref {
			t.Errorf("Route(%s %s) = %d %q, want %d %q", c.method, c.path, ep, ref, c.ep, c.ref)
		}
	}
}

func TestJudgeCreateOwnNetworkAndVolume(t *testing.T) {
	body := `{"Image":"x","NetworkingConfig":{"EndpointsConfig":{"n1":{"Aliases":["web"],"IPAMConfig":{}}}},
		"HostConfig":{"NetworkMode":"n1","Binds":["v1:/data","v1:/ro:ro"],"Mounts":[{"Type":"volume","Source":"v1","Target":"/m"}]}}`
	if _, r := JudgeCreate([]byte(body), scope()); r != nil {
		t.Fatalf("refused: %v", r)
	}
}

func TestJudgeVolumeCreate(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"Name":"v","Driver":"rexray"}`, "--driver rexray"},
		{`{"Name":"v","DriverOpts":{"type":"none","o":"bind","device":"/etc"}}`, "--opt"},
		{`{"Name":"v","Labels":{"sluice.session":"other"}}`, "the label sluice.session"},
		{`{"Name":"v","ClusterVolumeSpec":{"Group":"g"}}`, "cluster volumes"},
		{`[`, "not JSON"},
		{`{"Name":"v","driveropts":{"device":"/etc"},"DriverOpts":{}}`, "repeated key"},
	} {
		_, r := JudgeVolumeCreate([]byte(c.body), scope())
		if r == nil || !strings.Contains(r.Error(), c.want) || !strings.HasPrefix(r.Error(), "sluice: refused volume create: ") {
			t.Errorf("%s: %v, want a refusal saying %q", c.body, r, c.want)
		}
	}
	out, r := JudgeVolumeCreate([]byte(`{"Name":"v1","Driver":"local","DriverOpts":{},"Labels":{"a":"b"}}`), scope())
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	var v struct{ Labels map[string]string }
	if err := json.Unmarshal(out, &v); err != nil || v.Labels[SessionLabel] != "run-1-abc" || v.Labels["a"] != "b" {
		t.Errorf("labels: %s (%v)", out, err)
	}
}

func TestJudgeNetworkCreate(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"Name":"n","Driver":"macvlan"}`, "--driver macvlan"},
		{`{"Name":"n","Driver":"host"}`, "--driver host"},
		{`{"Name":"n","Options":{"com.docker.network.bridge.name":"eth0"}}`, "--opt com.docker.network.bridge.name"},
		{`{"Name":"n","Options":{"com.docker.network.bridge.host_binding_ipv4":"0.0.0.0"}}`, "--opt com.docker.network.bridge.host_binding_ipv4"},
		{`{"Name":"n","Options":{"com.docker.network.bridge.enable_ip_masquerade":"false"}}`, "--opt"},
		{`{"Name":"n","IPAM":{"Driver":"default","Config":[{"Subnet":"10.0.0.0/8"}]}}`, "--subnet"},
		{`{"Name":"n","IPAM":{"Config":[{"Gateway":"10.1.0.1"}]}}`, "--subnet, --gateway"},
		{`{"Name":"n","IPAM":{"Driver":"other"}}`, "--ipam-driver other"},
		{`{"Name":"n","Ingress":true}`, "--ingress"},
		{`{"Name":"n","ConfigOnly":true}`, "--config-only"},
		{`{"Name":"n","ConfigFrom":{"Network":"x"}}`, "--config-from"},
		{`{"Name":"n","Scope":"swarm"}`, "--scope swarm"},
		{`{"Name":"n","Labels":{"sluice.x":"1"}}`, "the label sluice.x"},
		{`{"Driver":"bridge"}`, "no name"},
		{`{"Name":"n","options":{"com.docker.network.bridge.name":"eth0"},"Options":{}}`, "repeated key"},
	} {
		_, r := JudgeNetworkCreate([]byte(c.body), scope())
		if r == nil || !strings.Contains(r.Error(), c.want) || !strings.HasPrefix(r.Error(), "sluice: refused network create: ") {
			t.Errorf("%s: %v, want a refusal saying %q", c.body, r, c.want)
		}
	}
	out, r := JudgeNetworkCreate([]byte(`{"Name":"n1","Driver":"bridge","Internal":true,"Attachable":true,"IPAM":{"Driver":"default","Config":[],"Options":{}},"Options":{},"Labels":{"a":"b"}}`), scope())
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	var n struct {
		Internal bool
		Labels   map[string]string
	}
	if err := json.Unmarshal(out, &n); err != nil || !n.Internal || n.Labels[SessionLabel] != "run-1-abc" || n.Labels["a"] != "b" {
		t.Errorf("body: %s (%v)", out, err)
	}
}

func TestRouteRefusesUncleanPaths(t *testing.T) {
	for _, p := range []string{"/images/../containers/other/json", "/v1.47/images//json", "/containers/mine/../other/start", "/_ping/"} {
		if ep, _ := Route("GET", p); ep != Refused {
			t.Errorf("%s: %v, want refused", p, ep)
		}
	}
	if ep, _ := Route("GET", "/v1.47/images/alpine/json"); ep != Images {
		t.Errorf("an image's inspect: %v", ep)
	}
}
