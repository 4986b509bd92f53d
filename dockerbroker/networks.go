// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The endpoints of the session's own networks and volumes.
const (
	NetCreate  Endpoint = iota + Build + 1 // POST /networks/create
	NetList                                // GET /networks: filtered to the session's
	NetOwn                                 // GET, DELETE /networks/{ref} of a network of the session
	NetConnect                             // POST /networks/{ref}/connect|disconnect
	VolCreate                              // POST /volumes/create
	VolList                                // GET /volumes: filtered to the session's
	VolOwn                                 // GET, DELETE /volumes/{name} of a volume of the session
)

// routeNetVol routes the networks' and volumes' endpoints (p without its
// version prefix); Refused for the rest of them (prune, and any other).
func routeNetVol(method, p string) (Endpoint, string, bool) {
	if rest, ok := strings.CutPrefix(p, "/networks"); ok && (rest == "" || rest[0] == '/') {
		rest = strings.TrimPrefix(rest, "/")
		ref, action, _ := strings.Cut(rest, "/")
		switch {
		case rest == "" && method == "GET":
			return NetList, "", true
		case rest == "create" && method == "POST":
			return NetCreate, "", true
		case ref != "" && ref != "prune" && action == "" && (method == "GET" || method == "DELETE"):
			return NetOwn, ref, true
		case ref != "" && method == "POST" && (action == "connect" || action == "disconnect"):
			return NetConnect, ref, true
		}
		return Refused, ref, true
	}
	if rest, ok := strings.CutPrefix(p, "/volumes"); ok && (rest == "" || rest[0] == '/') {
		rest = strings.TrimPrefix(rest, "/")
		switch {
		case rest == "" && method == "GET":
			return VolList, "", true
		case rest == "create" && method == "POST":
			return VolCreate, "", true
		case rest != "" && rest != "prune" && !strings.Contains(rest, "/") && (method == "GET" || method == "DELETE"):
			return VolOwn, rest, true
		}
		return Refused, rest, true
	}
	return Refused, "", false
}

// networkBody is the part of POST /networks/create the judge reads.
type networkBody struct {
	Name       string
	Driver     string
	Scope      string
	Options    map[string]string
	Labels     map[string]string
	Attachable bool
	Ingress    bool
	ConfigOnly bool
	ConfigFrom json.RawMessage
	IPAM       *struct {
		Driver  string
		Config  []json.RawMessage
		Options map[string]string
	}
}

// JudgeNetworkCreate judges a POST /networks/create body and returns the
// body to send to the engine, labelled as the session's. Only a bridge
// with the engine's own addressing: a bridge's options name the host's
// interface, its host binding and masquerading, and a subnet the client
// picks may overlap the machine's networks, whose routes the new bridge
// would take over. The addresses the engine picks from its pools are
// ones it knows to be free.
func JudgeNetworkCreate(body []byte, s Scope) ([]byte, *Refusal) {
	const what = "network create"
	if err := checkKeys(body); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	var n networkBody
	if err := json.Unmarshal(body, &n); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	if n.Name == "" {
		return nil, refuse(what, "no name given")
	}
	if n.Driver != "" && n.Driver != "bridge" {
		return nil, refuse(what, "--driver %s: only bridge networks (other drivers reach the machine's interfaces or a cluster)", n.Driver)
	}
	if n.Scope != "" && n.Scope != "local" {
		return nil, refuse(what, "--scope %s: only local networks", n.Scope)
	}
	if len(n.Options) > 0 {
		keys := make([]string, 0, len(n.Options))
		for k := range n.Options {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		k := keys[0]
		if len(k) > 80 {
			k = k[:80] + "..."
		}
		return nil, refuse(what, "--opt %s: a bridge's options change the machine's interfaces and firewall", k)
	}
	if n.IPAM != nil {
		if n.IPAM.Driver != "" && n.IPAM.Driver != "default" {
			return nil, refuse(what, "--ipam-driver %s: only the engine's own addressing", n.IPAM.Driver)
		}
		if len(n.IPAM.Config) > 0 || len(n.IPAM.Options) > 0 {
			return nil, refuse(what, "--subnet, --gateway, --ip-range and --aux-address: a subnet the session picks could overlap the machine's networks and take over their routes; the engine picks a free one")
		}
	}
	// Attachable only means something for a swarm network, refused
	// above by scope and driver: compose sets it on its local bridges.
	if n.Ingress {
		return nil, refuse(what, "--ingress is swarm's: not judged")
	}
	if n.ConfigOnly || isSet(n.ConfigFrom) {
		return nil, refuse(what, "--config-only and --config-from: a network's configuration is judged where it is given")
	}
	if r := noSluiceLabels(what, n.Labels); r != nil {
		return nil, r
	}
	return labelled(what, body, s)
}

// endpointBody is the part of a network endpoint's settings the judge
// reads (in a container's create and in a network connect).
type endpointBody struct {
	IPAMConfig *struct {
		IPv4Address, IPv6Address string
		LinkLocalIPs             []string
	}
	DriverOpts map[string]string
}

// judgeEndpoint judges a container's endpoint on the network name:
// aliases and links pass; fixed addresses are refused (the engine takes
// them only on networks with a subnet the client configured, which the
// session's networks never have), and so are the endpoint's driver
// options (sysctls of its interface).
func judgeEndpoint(what, name string, raw json.RawMessage) *Refusal {
	if !isSet(raw) {
		return nil
	}
	var e endpointBody
	if err := json.Unmarshal(raw, &e); err != nil {
		return refuse(what, "the network %s's settings are not JSON the broker can read: %v", name, err)
	}
	if c := e.IPAMConfig; c != nil && (c.IPv4Address != "" || c.IPv6Address != "" || len(c.LinkLocalIPs) > 0) {
		return refuse(what, "--ip, --ip6 and --link-local-ip on %s: fixed addresses need a subnet the client configured, which sluice refuses", name)
	}
	if len(e.DriverOpts) > 0 {
		return refuse(what, "driver options of the endpoint on %s: not judged", name)
	}
	return nil
}

// isDefaultNet reports whether a network mode or name is the engine's
// default network or none.
func isDefaultNet(n string) bool {
	return n == "" || n == "default" || n == "bridge" || n == "none"
}

// networkCreate judges a network's create and remembers the network the
// engine made.
func (b *Broker) networkCreate(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
		return
	}
	out, rf := JudgeNetworkCreate(body, b.cfg.Scope)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	b.forwardRecorded(w, r, out, func(answer []byte) {
		var c struct{ Id string }
		if json.Unmarshal(answer, &c) == nil && c.Id != "" {
			b.mu.Lock()
			b.networks[c.Id] = true
			b.mu.Unlock()
		}
	})
}

// resolveNetwork resolves ref (id, short id, name) through the engine
// and reports whether it is one of the session's networks: created by
// this broker and labelled as the session's.
func (b *Broker) resolveNetwork(ctx context.Context, ref string) (string, bool) {
	id, labels, found := b.inspect(ctx, "/networks/"+url.PathEscape(ref), "Id")
	if !found {
		return "", false
	}
	b.mu.Lock()
	owned := b.networks[id]
	b.mu.Unlock()
	return id, owned && labels[SessionLabel] == b.cfg.Scope.Session
}

// networkConnect judges a connect or disconnect: the session's network
// and container, no fixed address.
func (b *Broker) networkConnect(w http.ResponseWriter, r *http.Request, ref string) {
	const what = "network connect"
	id, ok := b.resolveNetwork(r.Context(), ref)
	if !ok {
		b.refuse(w, http.StatusForbidden, refuse(what, "%s is not a network of this session", ref))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "sluice: "+err.Error())
		return
	}
	var c struct {
		Container      string
		EndpointConfig json.RawMessage
	}
	if err := checkKeys(body); err != nil {
		b.refuse(w, http.StatusBadRequest, refuse(what, "its body is not JSON the broker can read: %v", err))
		return
	}
	if err := json.Unmarshal(body, &c); err != nil {
		b.refuse(w, http.StatusBadRequest, refuse(what, "its body is not JSON the broker can read: %v", err))
		return
	}
	cid, ok := b.resolveOwn(r.Context(), c.Container)
	if !ok {
		b.refuse(w, http.StatusForbidden, refuse(what, "%s is not a container of this session", c.Container))
		return
	}
	if rf := judgeEndpoint(what, ref, c.EndpointConfig); rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	m, err := decodeObject(body)
	if err != nil {
		b.refuse(w, http.StatusBadRequest, refuse(what, "its body is not a JSON object"))
		return
	}
	m[keyFor(m, "Container")] = cid
	out, _ := json.Marshal(m)
	r.URL.Path = versionPrefix.FindString(r.URL.Path) + "networks/" + id + "/" + pathAction(r.URL.Path)
	if !strings.HasPrefix(r.URL.Path, "/") {
		r.URL.Path = "/" + r.URL.Path
	}
	b.forward(w, r, out, nil)
}

// pathAction is the last element of a path.
func pathAction(p string) string {
	return p[strings.LastIndex(p, "/")+1:]
}

// Networks are the ids of the networks the session created.
func (b *Broker) Networks() []string { return b.keys(b.networks) }

// removeNetVol removes the session's networks and then its volumes (its
// containers are gone by then); ones already gone are not errors.
func (b *Broker) removeNetVol(ctx context.Context) error {
	var errs []error
	for _, id := range b.Networks() {
		errs = append(errs, b.delete(ctx, "network", "/networks/"+id))
	}
	for _, name := range b.Volumes() {
		errs = append(errs, b.delete(ctx, "volume", "/volumes/"+url.PathEscape(name)))
	}
	return errors.Join(errs...)
}

// delete sends DELETE path to the engine; gone already is not an error.
func (b *Broker) delete(ctx context.Context, what, path string) error {
	req, err := http.NewRequestWithContext(ctx, "DELETE", "http://docker"+path, nil)
	if err != nil {
		return err
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return fmt.Errorf("remove %s %s: %w", what, shorten(pathAction(path)), err)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("remove %s %s: %s: %s", what, shorten(pathAction(path)), resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

// inspect asks the engine for path (a network's or volume's inspect) and
// returns its idField and labels; found is false when the engine does
// not answer it.
func (b *Broker) inspect(ctx context.Context, path, idField string) (id string, labels map[string]string, found bool) {
	id, labels, status := b.inspectStatus(ctx, path, idField)
	return id, labels, status == http.StatusOK
}

// inspectStatus is inspect with the engine's status (0: no answer, or
// one the broker cannot read).
func (b *Broker) inspectStatus(ctx context.Context, path, idField string) (id string, labels map[string]string, status int) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://docker"+path, nil)
	if err != nil {
		return "", nil, 0
	}
	resp, err := b.engine.Do(req)
	if err != nil {
		return "", nil, 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, resp.StatusCode
	}
	var m map[string]json.RawMessage
	if json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&m) != nil {
		return "", nil, 0
	}
	if json.Unmarshal(m[idField], &id) != nil || id == "" {
		return "", nil, 0
	}
	_ = json.Unmarshal(m["Labels"], &labels)
	return id, labels, http.StatusOK
}

// notFound reports whether the engine knows no network or volume path
// names: a client asks before it creates one (compose does), and is told
// so as the engine would, not refused. Nothing is forwarded: the name is
// answered by the broker.
func (b *Broker) notFound(w http.ResponseWriter, r *http.Request, kind, ref, path string) bool {
	if _, _, st := b.inspectStatus(r.Context(), path, map[string]string{"network": "Id", "volume": "Name"}[kind]); st != http.StatusNotFound {
		return false
	}
	writeError(w, http.StatusNotFound, kind+" "+ref+" not found")
	return true
}

func (b *Broker) keys(set map[string]bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ks []string
	for k := range set {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
