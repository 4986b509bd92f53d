// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// files is a ReadFile over a map.
func files(m map[string]string) ReadFile {
	return func(name string) ([]byte, error) {
		if b, ok := m[name]; ok {
			return []byte(b), nil
		}
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
}

const bundle = "/run/containerd/io.containerd.runtime.v2.task/moby/" + id

func dockerBundle(dataRoot string) string {
	return `{"ociVersion":"1.0.2","mounts":[{"destination":"/proc","source":"proc"},` +
		`{"destination":"/etc/hostname","type":"bind","source":"` + dataRoot + `/containers/` + id + `/hostname"}]}`
}

// Docker's labels come from config.v2.json, found through the bundle's
// hostname mount; annotations (containerd, CRI, podman) from config.json.
func TestReadRecord(t *testing.T) {
	docker := files(map[string]string{
		bundle + "/config.json":                                dockerBundle("/var/lib/docker"),
		"/var/lib/docker/containers/" + id + "/config.v2.json": `{"ID":"` + id + `","Config":{"Labels":{"sluice.policy":"alpha","x":"y"}}}`,
	})
	rec, err := ReadRecord(id, bundle, docker)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := rec.Policy(); !ok || p != "alpha" {
		t.Errorf("docker label: %q %v (%+v)", p, ok, rec)
	}
	if !strings.Contains(rec.Source, "config.v2.json") {
		t.Errorf("source %q does not name Docker's record", rec.Source)
	}

	// Docker without the label: a record that says "no label".
	rec, err = ReadRecord(id, bundle, files(map[string]string{
		bundle + "/config.json":                   dockerBundle("/d"),
		"/d/containers/" + id + "/config.v2.json": `{"ID":"` + id + `","Config":{}}`,
	}))
	if _, ok := rec.Policy(); err != nil || ok {
		t.Errorf("docker without a label: %+v %v", rec, err)
	}

	// --network container:OTHER: the hostname file is the other
	// container's, of the same engine: the data root is the same.
	other := strings.Repeat("c", 64)
	rec, err = ReadRecord(id, bundle, files(map[string]string{
		bundle + "/config.json":                      strings.Replace(dockerBundle("/d"), "/containers/"+id+"/", "/containers/"+other+"/", 1),
		"/d/containers/" + id + "/config.v2.json":    `{"ID":"` + id + `","Config":{"Labels":{"sluice.policy":"alpha"}}}`,
		"/d/containers/" + other + "/config.v2.json": `{"ID":"` + other + `","Config":{"Labels":{"sluice.policy":"other"}}}`,
	}))
	if p, _ := rec.Policy(); err != nil || p != "alpha" {
		t.Errorf("a container in another's network namespace: %+v %v, want its own label alpha", rec, err)
	}

	// An annotation (containerd, CRI, podman --annotation).
	cri := "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id
	rec, err = ReadRecord(id, cri, files(map[string]string{
		cri + "/config.json": `{"annotations":{"sluice.policy":"beta"}}`,
	}))
	if p, _ := rec.Policy(); err != nil || p != "beta" {
		t.Errorf("annotation: %+v %v", rec, err)
	}
}

// What cannot be read, or contradicts itself, is an error, never "no
// label".
func TestReadRecordErrors(t *testing.T) {
	other := strings.Repeat("a", 64)
	for name, tc := range map[string]struct {
		id    string
		files map[string]string
		want  string
	}{
		"no config":                {id, nil, "read its OCI config"},
		"docker without its files": {id, map[string]string{bundle + "/config.json": `{"mounts":[]}`}, "data root is unknown"},
		"docker without a record":  {id, map[string]string{bundle + "/config.json": dockerBundle("/d")}, "read Docker's record"},
		"bad config":               {id, map[string]string{bundle + "/config.json": "{"}, "config.json"},
		"not an id":                {"abc", nil, "not a container id"},
		"bad docker json":          {id, map[string]string{bundle + "/config.json": dockerBundle("/d"), "/d/containers/" + id + "/config.v2.json": "["}, "config.v2.json"},
		"another's record": {id, map[string]string{bundle + "/config.json": dockerBundle("/d"),
			"/d/containers/" + id + "/config.v2.json": `{"ID":"` + other + `"}`}, "is the record of"},
		"contradiction": {id, map[string]string{bundle + "/config.json": strings.Replace(dockerBundle("/d"), `{"ociVersion"`, `{"annotations":{"sluice.policy":"a"},"ociVersion"`, 1),
			"/d/containers/" + id + "/config.v2.json": `{"ID":"` + id + `","Config":{"Labels":{"sluice.policy":"b"}}}`}, "label sluice.policy"},
	} {
		_, err := ReadRecord(tc.id, bundle, files(tc.files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", name, err, tc.want)
		}
	}
}

// A bundle must name the container: containerd's .../<id>, podman's
// .../<id>/userdata; conmon names its bundle with -b.
func TestBundleNamesID(t *testing.T) {
	for b, want := range map[string]bool{
		bundle: true,
		"/var/lib/containers/storage/overlay-containers/" + id + "/userdata":            true,
		"/run/containerd/io.containerd.runtime.v2.task/moby/" + strings.Repeat("b", 64): false,
		"/tmp/userdata": false,
		"/":             false,
	} {
		if got := BundleNamesID(b, id); got != want {
			t.Errorf("BundleNamesID(%q) = %v, want %v", b, got, want)
		}
	}
	if got := BundleFromArgs([]string{"conmon", "--api-version", "1", "-c", id, "-b", "/x/" + id + "/userdata"}); got != "/x/"+id+"/userdata" {
		t.Errorf("conmon -b: %q", got)
	}
	if got := BundleFromArgs([]string{"shim", "--bundle=/y"}); got != "/y" {
		t.Errorf("--bundle=: %q", got)
	}
	if got := BundleFromArgs([]string{"containerd-shim-runc-v2", "-namespace", "moby", "-id", id}); got != "" {
		t.Errorf("containerd shim: %q, want none (its working directory is the bundle)", got)
	}
}
