// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// volumeBody is the part of POST /volumes/create the judge reads.
type volumeBody struct {
	Name              string
	Driver            string
	DriverOpts        map[string]string
	Labels            map[string]string
	ClusterVolumeSpec json.RawMessage
}

// JudgeVolumeCreate judges a POST /volumes/create body and returns the
// body to send to the engine, labelled as the session's. Only the local
// driver with no options: the local driver's options are mount(2)'s
// (type=none,o=bind,device=/etc binds a host path; device=/dev/sda
// mounts a disk), and another driver is a plugin sluice does not judge.
func JudgeVolumeCreate(body []byte, s Scope) ([]byte, *Refusal) {
	const what = "volume create"
	if err := checkKeys(body); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	var v volumeBody
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	if v.Driver != "" && v.Driver != "local" {
		return nil, refuse(what, "--driver %s: only the local driver (volume plugins are not judged)", v.Driver)
	}
	if len(v.DriverOpts) > 0 {
		return nil, refuse(what, "--opt: the local driver's options mount host devices and paths (device=, o=bind)")
	}
	if isSet(v.ClusterVolumeSpec) {
		return nil, refuse(what, "cluster volumes: swarm is not judged")
	}
	if r := noSluiceLabels(what, v.Labels); r != nil {
		return nil, r
	}
	return labelled(what, body, s)
}

// noSluiceLabels refuses labels starting with LabelPrefix.
func noSluiceLabels(what string, labels map[string]string) *Refusal {
	for k := range labels {
		if strings.HasPrefix(k, LabelPrefix) {
			return refuse(what, "the label %s: labels starting with %q are sluice's own", k, LabelPrefix)
		}
	}
	return nil
}

// labelled is body with the session's labels set, every other field as
// the client sent it.
func labelled(what string, body []byte, s Scope) ([]byte, *Refusal) {
	m, err := decodeObject(body)
	if err != nil {
		return nil, refuse(what, "its body is not a JSON object")
	}
	lk := keyFor(m, "Labels")
	labels, _ := m[lk].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	s.label(labels)
	m[lk] = labels
	out, err := json.Marshal(m)
	if err != nil {
		return nil, refuse(what, "%v", err)
	}
	return out, nil
}

// volumeCreate judges a volume's create, refuses a name that is already
// another's (the engine answers a create of an existing name with that
// volume) and remembers the volume the engine made when it carries the
// session's label.
func (b *Broker) volumeCreate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
		return
	}
	out, rf := JudgeVolumeCreate(body, b.cfg.Scope)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	var v struct{ Name string }
	_ = json.Unmarshal(body, &v)
	if v.Name != "" {
		if _, labels, found := b.inspect(r.Context(), "/volumes/"+url.PathEscape(v.Name), "Name"); found && labels[SessionLabel] != b.cfg.Scope.Session {
			b.refuse(w, http.StatusForbidden, refuse("volume create", "the volume %s exists and is not this session's", v.Name))
			return
		}
	}
	b.forwardRecorded(w, r, out, func(answer []byte) {
		var c struct {
			Name   string
			Labels map[string]string
		}
		if json.Unmarshal(answer, &c) == nil && c.Name != "" && c.Labels[SessionLabel] == b.cfg.Scope.Session {
			b.mu.Lock()
			b.volumes[c.Name] = true
			b.mu.Unlock()
		}
	})
}

// ownsVolume reports whether name is one of the session's volumes:
// created through this broker and labelled as the session's.
func (b *Broker) ownsVolume(ctx context.Context, name string) bool {
	n, labels, found := b.inspect(ctx, "/volumes/"+url.PathEscape(name), "Name")
	if !found {
		return false
	}
	b.mu.Lock()
	owned := b.volumes[n]
	b.mu.Unlock()
	return owned && labels[SessionLabel] == b.cfg.Scope.Session
}

// Volumes are the names of the volumes the session created.
func (b *Broker) Volumes() []string { return b.keys(b.volumes) }
