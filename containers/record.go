// SPDX-License-Identifier: Apache-2.0

package containers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// PolicyLabel is the label (or OCI annotation) that selects a container's
// named policy: docker run --label sluice.policy=NAME.
const PolicyLabel = "sluice.policy"

// Record is what sluice reads of an engine's record of a container.
type Record struct {
	ID string
	// Labels are the container's labels: the OCI annotations, and for
	// Docker its --label values (the same key in both with different
	// values is an error: the record contradicts itself).
	Labels map[string]string
	// Source names the files the labels came from, for log lines.
	Source string
}

// Policy returns the value of the sluice.policy label and whether the
// container has one.
func (r Record) Policy() (string, bool) {
	v, ok := r.Labels[PolicyLabel]
	return v, ok
}

// ReadFile reads a file of the engine's record; ReadRecord's caller
// decides which files it trusts (on Linux: root's, not writable by
// others).
type ReadFile func(name string) ([]byte, error)

// ociConfig is the part of an OCI runtime config.json sluice reads.
type ociConfig struct {
	Annotations map[string]string `json:"annotations"`
	Mounts      []struct {
		Destination string `json:"destination"`
		Source      string `json:"source"`
	} `json:"mounts"`
}

// dockerConfig is the part of Docker's config.v2.json sluice reads.
type dockerConfig struct {
	ID     string `json:"ID"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
}

// ReadRecord reads the record of container id from its OCI bundle
// directory: the bundle's config.json, and when the bundle is Docker's,
// the config.v2.json beside the hostname file Docker bind-mounts into the
// container (<data root>/containers/<id>/hostname).
func ReadRecord(id, bundle string, read ReadFile) (Record, error) {
	if !IsID(id) {
		return Record{}, fmt.Errorf("containers: %q is not a container id", id)
	}
	cfgPath := path.Join(bundle, "config.json")
	b, err := read(cfgPath)
	if err != nil {
		return Record{}, fmt.Errorf("containers: container %s: read its OCI config: %w", id[:12], err)
	}
	var oc ociConfig
	if err := json.Unmarshal(b, &oc); err != nil {
		return Record{}, fmt.Errorf("containers: container %s: %s: %w", id[:12], cfgPath, err)
	}
	rec := Record{ID: id, Labels: map[string]string{}, Source: cfgPath}
	for k, v := range oc.Annotations {
		rec.Labels[k] = v
	}
	dc, dcPath, err := dockerRecord(id, bundle, oc, read)
	if err != nil {
		return Record{}, err
	}
	if dcPath != "" {
		rec.Source += " and " + dcPath
		for k, v := range dc.Config.Labels {
			if old, ok := rec.Labels[k]; ok && old != v {
				return Record{}, fmt.Errorf("containers: container %s: label %s is %q in %s but annotation %q in %s", id[:12], k, v, dcPath, old, cfgPath)
			}
			rec.Labels[k] = v
		}
	}
	return rec, nil
}

// dockerFiles are the files Docker bind-mounts into every container from
// <data root>/containers/<id>/; with --network container:OTHER they are
// OTHER's, of the same engine and so the same data root.
var dockerFiles = map[string]bool{"/etc/hostname": true, "/etc/hosts": true, "/etc/resolv.conf": true}

// dockerRecord reads Docker's config.v2.json of container id when the
// OCI config shows Docker made it ("" when it does not). A bundle in
// containerd's "moby" namespace is Docker's: there a missing record is an
// error, not "no labels".
func dockerRecord(id, bundle string, oc ociConfig, read ReadFile) (dockerConfig, string, error) {
	var dataRoot string
	for _, m := range oc.Mounts {
		if !dockerFiles[m.Destination] {
			continue
		}
		d := path.Dir(path.Clean(m.Source)) // <data root>/containers/<some id>
		if IsID(path.Base(d)) && path.Base(path.Dir(d)) == "containers" && strings.HasPrefix(d, "/") {
			dataRoot = path.Dir(path.Dir(d))
			break
		}
	}
	moby := path.Base(path.Dir(path.Clean(bundle))) == "moby"
	if dataRoot == "" {
		if moby {
			return dockerConfig{}, "", fmt.Errorf("containers: container %s: a Docker bundle without Docker's files: its data root is unknown", id[:12])
		}
		return dockerConfig{}, "", nil
	}
	p := path.Join(dataRoot, "containers", id, "config.v2.json")
	b, err := read(p)
	if errors.Is(err, fs.ErrNotExist) && !moby {
		// Laid out like Docker's, but no Docker record: the annotations
		// are the record.
		return dockerConfig{}, "", nil
	}
	if err != nil {
		return dockerConfig{}, "", fmt.Errorf("containers: container %s: read Docker's record: %w", id[:12], err)
	}
	var dc dockerConfig
	if err := json.Unmarshal(b, &dc); err != nil {
		return dockerConfig{}, "", fmt.Errorf("containers: container %s: %s: %w", id[:12], p, err)
	}
	if dc.ID != id {
		return dockerConfig{}, "", fmt.Errorf("containers: container %s: %s is the record of %q", id[:12], p, dc.ID)
	}
	return dc, p, nil
}

// BundleNamesID reports whether an OCI bundle path belongs to container id:
// containerd's bundles are .../<namespace>/<id>, podman's
// .../overlay-containers/<id>/userdata.
func BundleNamesID(bundle, id string) bool {
	b := path.Clean(bundle)
	return path.Base(b) == id || (path.Base(b) == "userdata" && path.Base(path.Dir(b)) == id)
}

// BundleFromArgs returns the bundle an engine's shim names in its command
// line (conmon's -b/--bundle), or "".
func BundleFromArgs(args []string) string {
	for i, a := range args {
		switch {
		case (a == "-b" || a == "--bundle") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--bundle="):
			return strings.TrimPrefix(a, "--bundle=")
		}
	}
	return ""
}
