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
	f, _ := json.Marshal(map[string][]string{"label": {RootLabel + "=" + root}})
	filter := url.QueryEscape(string(f))
	var out []Leftover
	var errs []error
	dead := func(labels map[string]string) bool {
		s := labels[SessionLabel]
		return labels[RootLabel] == root && s != "" && s != b.cfg.Scope.Session && !alive(s)
	}

	var cs []struct {
		Id     string
		Labels map[string]string
	}
	if err := b.getJSON(ctx, "/containers/json?all=1&filters="+filter, &cs); err != nil {
		return nil, err
	}
	for _, c := range cs {
		if dead(c.Labels) {
			if err := b.remove(ctx, c.Id); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, Leftover{"container", c.Id, c.Labels[SessionLabel]})
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
		if dead(n.Labels) {
			if err := b.delete(ctx, "network", "/networks/"+n.Id); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, Leftover{"network", n.Id, n.Labels[SessionLabel]})
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
		if dead(v.Labels) {
			if err := b.delete(ctx, "volume", "/volumes/"+url.PathEscape(v.Name)); err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, Leftover{"volume", v.Name, v.Labels[SessionLabel]})
		}
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
