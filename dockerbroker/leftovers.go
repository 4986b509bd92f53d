// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Leftover is a container, network or volume a session of the same root
// left on the engine when it could not end (its sluice run was killed):
// Kind ("container", "network", "volume"), its ID (a volume's name) and
// the Session that made it.
type Leftover struct {
	Kind, ID, Session string
}

// RemoveLeftovers removes from the engine what sessions of the broker's
// root made and can no longer remove: containers (by force, with their
// anonymous volumes), then networks, then volumes labelled with the root
// and a session other than this one for which alive is false. Things of
// other roots, of live sessions and without sluice's labels are left
// alone. It returns what it removed.
func (b *Broker) RemoveLeftovers(ctx context.Context, alive func(session string) bool) ([]Leftover, error) {
	root := b.cfg.Scope.Root
	if root == "" {
		return nil, nil
	}
	things, err := b.labelled(ctx)
	if things == nil {
		return nil, err
	}
	errs := []error{err}
	var out []Leftover
	for _, t := range things {
		s := t.labels[SessionLabel]
		if s == "" || s == b.cfg.Scope.Session || alive(s) {
			continue
		}
		var err error
		switch t.kind {
		case "container":
			err = b.remove(ctx, t.id)
		case "network":
			err = b.delete(ctx, "network", "/networks/"+t.id)
		default:
			err = b.delete(ctx, "volume", "/volumes/"+url.PathEscape(t.id))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Leftover{t.kind, t.id, s})
	}
	return out, errors.Join(errs...)
}

// Resume takes back what the broker's session made on the engine before
// this broker served it (a daemon that served the session restarted):
// its containers, networks and volumes, as their labels say, which only
// a broker sets (a client's sluice labels are replaced). It returns the
// ids of its running containers, which its session attaches again.
func (b *Broker) Resume(ctx context.Context) ([]string, error) {
	if b.cfg.Scope.Root == "" {
		return nil, errors.New("resume: the broker has no root to find its session's things by")
	}
	things, err := b.labelled(ctx)
	if things == nil && err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	var running []string
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range things {
		if t.labels[SessionLabel] != b.cfg.Scope.Session {
			continue
		}
		switch t.kind {
		case "container":
			b.owned[t.id] = true
			if t.running {
				running = append(running, t.id)
			}
		case "network":
			b.networks[t.id] = true
		default:
			b.volumes[t.id] = true
		}
	}
	return running, err
}

// thing is a container, network or volume of the broker's root.
type thing struct {
	kind, id string // a volume's id is its name
	labels   map[string]string
	running  bool // a running container
}

// labelled lists the containers (stopped ones too), networks and volumes
// labelled with the broker's root. A failed list of networks or volumes
// is an error beside what the others gave; a failed list of containers
// gives nothing.
func (b *Broker) labelled(ctx context.Context) ([]thing, error) {
	root := b.cfg.Scope.Root
	f, _ := json.Marshal(map[string][]string{"label": {RootLabel + "=" + root}})
	filter := url.QueryEscape(string(f))
	mine := func(labels map[string]string) bool { return labels[RootLabel] == root }
	var out []thing
	var errs []error

	var cs []struct {
		Id     string
		State  string
		Labels map[string]string
	}
	if err := b.getJSON(ctx, "/containers/json?all=1&filters="+filter, &cs); err != nil {
		return nil, err
	}
	for _, c := range cs {
		if mine(c.Labels) {
			out = append(out, thing{"container", c.Id, c.Labels, c.State == "running"})
		}
	}
	var ns []struct {
		Id     string
		Labels map[string]string
	}
	if err := b.getJSON(ctx, "/networks?filters="+filter, &ns); err != nil {
		errs = append(errs, err)
	}
	for _, n := range ns {
		if mine(n.Labels) {
			out = append(out, thing{"network", n.Id, n.Labels, false})
		}
	}
	var vs struct {
		Volumes []struct {
			Name   string
			Labels map[string]string
		}
	}
	if err := b.getJSON(ctx, "/volumes?filters="+filter, &vs); err != nil {
		errs = append(errs, err)
	}
	for _, v := range vs.Volumes {
		if mine(v.Labels) {
			out = append(out, thing{"volume", v.Name, v.Labels, false})
		}
	}
	if out == nil {
		out = []thing{}
	}
	return out, errors.Join(errs...)
}

// getJSON decodes the engine's answer to GET path into v.
func (b *Broker) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return fmt.Errorf("the engine: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the engine: GET %s: %s: %s", shorten(path), resp.Status, msg)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v); err != nil {
		return fmt.Errorf("the engine's answer to GET %s: %w", shorten(path), err)
	}
	return nil
}
