// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	gopath "path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// SessionLabel is the label sluice puts on every container a session
// creates through its broker; its value is the session's name. Labels
// starting with LabelPrefix are sluice's: a client may not set them.
// RootLabel names the sluice root (instance) whose session made it, so
// that a later session of that root can remove what a killed one left.
const (
	SessionLabel = "sluice.session"
	RootLabel    = "sluice.root"
	LabelPrefix  = "sluice."
)

// Refusal is a request the broker does not pass to the engine: What was
// asked, Why it is refused.
type Refusal struct {
	What, Why string
}

// Error is the message the client gets.
func (r *Refusal) Error() string { return "sluice: " + r.Line() }

// Line is the refusal as the session's line and audit message say it.
func (r *Refusal) Line() string { return "refused " + r.What + ": " + r.Why }

func refuse(what, format string, args ...any) *Refusal {
	return &Refusal{What: what, Why: fmt.Sprintf(format, args...)}
}

// Scope is what a session's containers may have.
type Scope struct {
	// Session is the session's name, the value of SessionLabel.
	Session string
	// Root is the name of the sluice root the session is in, the value
	// of RootLabel ("": no such label).
	Root string
	// Workspace is the directory whose tree the session's containers may
	// bind ("" or "/": no host path at all).
	Workspace string
	// CgroupParent is the cgroup parent every container gets (sluice's
	// root, where a cgroup with no session is refused all but loopback).
	CgroupParent string
	// Owns reports whether a container reference (id, short id or name)
	// is one of the session's containers, for container:<ref> modes.
	Owns func(ref string) bool
	// OwnsNetwork reports whether a network reference (id, short id or
	// name) is one of the session's networks; nil: none is.
	OwnsNetwork func(ref string) bool
	// OwnsVolume reports whether a volume name is one of the session's
	// volumes; nil: none is.
	OwnsVolume func(name string) bool
	// Resolve resolves symbolic links in a host path as the engine will
	// (filepath.EvalSymlinks); nil: the path as written.
	Resolve func(string) (string, error)
	// Sockets are host paths no container may bind whatever the
	// workspace (the engine's socket, the broker's own).
	Sockets []string
	// Guarded are the paths the session's sandbox hides or makes
	// read-only: a bind of one of them, or of a directory above one,
	// would show or open it in the container (the engine mounts from
	// the machine's view, not the session's). nil: none; an error: the
	// list is not known, and every bind is refused.
	Guarded func() ([]string, error)
}

// defaultCaps is Docker's default capability set (moby's
// oci/caps/defaults.go): adding one of these changes nothing.
var defaultCaps = []string{"CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
	"SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE"}

// createBody is the part of POST /containers/create the judge reads.
type createBody struct {
	Labels           map[string]string
	NetworkingConfig struct {
		EndpointsConfig map[string]json.RawMessage
	}
	HostConfig struct {
		Privileged        bool
		CapAdd            []string
		NetworkMode       string
		PidMode           string
		IpcMode           string
		UTSMode           string
		UsernsMode        string
		CgroupnsMode      string
		CgroupParent      string
		Runtime           string
		Devices           []json.RawMessage
		DeviceRequests    []json.RawMessage
		DeviceCgroupRules []string
		SecurityOpt       []string
		Sysctls           map[string]string
		Binds             []string
		Mounts            []struct {
			Type, Source, Target string
			VolumeOptions        *struct {
				DriverConfig *struct {
					Name    string
					Options map[string]string
				}
			}
		}
		LogConfig struct {
			Type   string
			Config map[string]string
		}
		VolumesFrom     []string
		PortBindings    map[string][]json.RawMessage
		PublishAllPorts bool
		VolumeDriver    string
		MaskedPaths     json.RawMessage
		ReadonlyPaths   json.RawMessage
		Cgroup          string
	}
}

// JudgeCreate judges a POST /containers/create body against s and
// returns the body to send to the engine: the same request with the
// session's label and cgroup parent set. Every field it does not know is
// passed on unchanged; the ones that would give a container more than
// the session has are refused.
func JudgeCreate(body []byte, s Scope) ([]byte, *Refusal) {
	const what = "container create"
	if err := checkKeys(body); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	var c createBody
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, refuse(what, "its body is not JSON the broker can read: %v", err)
	}
	for k := range c.Labels {
		if strings.HasPrefix(k, LabelPrefix) {
			return nil, refuse(what, "the label %s: labels starting with %q are sluice's own", k, LabelPrefix)
		}
	}
	h := c.HostConfig
	if h.Privileged {
		return nil, refuse(what, "--privileged gives the container the machine's devices and every capability")
	}
	for _, cp := range h.CapAdd {
		n := strings.TrimPrefix(strings.ToUpper(cp), "CAP_")
		if !slices.Contains(defaultCaps, n) {
			return nil, refuse(what, "--cap-add %s: only Docker's default capabilities are allowed", cp)
		}
	}
	switch m := h.NetworkMode; {
	case m == "" || m == "default" || m == "bridge" || m == "none":
	case m == "host":
		return nil, refuse(what, "--network host: the container would use the machine's network, outside the session")
	case strings.HasPrefix(m, "container:"):
		if s.Owns == nil || !s.Owns(strings.TrimPrefix(m, "container:")) {
			return nil, refuse(what, "--network %s: not a container of this session", m)
		}
	default:
		if s.OwnsNetwork == nil || !s.OwnsNetwork(m) {
			return nil, refuse(what, "--network %s: only the default network, none and the session's own networks", m)
		}
	}
	for _, ns := range []struct{ flag, mode string }{{"--pid", h.PidMode}, {"--ipc", h.IpcMode}, {"--uts", h.UTSMode},
		{"--userns", h.UsernsMode}, {"--cgroupns", h.CgroupnsMode}} {
		if ns.mode == "host" {
			return nil, refuse(what, "%s host: the container would share the machine's namespace", ns.flag)
		}
		if ref, ok := strings.CutPrefix(ns.mode, "container:"); ok && (s.Owns == nil || !s.Owns(ref)) {
			return nil, refuse(what, "%s %s: not a container of this session", ns.flag, ns.mode)
		}
	}
	for n, e := range c.NetworkingConfig.EndpointsConfig {
		if n != h.NetworkMode && !isDefaultNet(n) && (s.OwnsNetwork == nil || !s.OwnsNetwork(n)) {
			return nil, refuse(what, "the network %s: only the default network, none and the session's own networks", n)
		}
		if r := judgeEndpoint(what, n, e); r != nil {
			return nil, r
		}
	}
	if isSet(h.MaskedPaths) || isSet(h.ReadonlyPaths) {
		return nil, refuse(what, "MaskedPaths and ReadonlyPaths: the paths of /proc and /sys Docker masks stay masked")
	}
	if h.Cgroup != "" {
		return nil, refuse(what, "--cgroup %s: sluice places the session's containers itself", h.Cgroup)
	}
	if h.CgroupParent != "" {
		return nil, refuse(what, "--cgroup-parent %s: sluice places the session's containers itself", h.CgroupParent)
	}
	if h.Runtime != "" && h.Runtime != "runc" {
		return nil, refuse(what, "--runtime %s: only the default runtime", h.Runtime)
	}
	if len(h.Devices) > 0 || len(h.DeviceRequests) > 0 || len(h.DeviceCgroupRules) > 0 {
		return nil, refuse(what, "--device, --gpus and --device-cgroup-rule give the container the machine's devices")
	}
	for _, o := range h.SecurityOpt {
		k, v, _ := strings.Cut(o, "=")
		if !strings.Contains(o, "=") {
			k, v, _ = strings.Cut(o, ":")
		}
		switch {
		case k == "no-new-privileges" && v != "false":
		case k == "label" && v != "disable" && v != "" && !strings.HasPrefix(v, "type:"):
		default:
			return nil, refuse(what, "--security-opt %s: only no-new-privileges (seccomp, AppArmor and SELinux stay as Docker sets them)", shorten(o))
		}
	}
	if len(h.Sysctls) > 0 {
		return nil, refuse(what, "--sysctl: kernel settings are not the session's to change")
	}
	if len(h.VolumesFrom) > 0 {
		return nil, refuse(what, "--volumes-from: volumes of other containers are not judged yet")
	}
	if len(h.PortBindings) > 0 || h.PublishAllPorts {
		return nil, refuse(what, "--publish: the engine would listen on the machine's network for the container")
	}
	if h.VolumeDriver != "" {
		return nil, refuse(what, "--volume-driver: volume plugins are not judged")
	}
	// The engine, outside the session, ships the container's output where
	// a log driver says: syslog, gelf, fluentd, splunk and awslogs reach
	// any address (--log-opt syslog-address=udp://...). Only the drivers
	// that keep logs on the machine pass.
	switch h.LogConfig.Type {
	case "", "json-file", "local", "none":
	default:
		return nil, refuse(what, "--log-driver %s: the engine would send the container's output over the network, outside the session; only json-file, local and none", h.LogConfig.Type)
	}
	for _, b := range h.Binds {
		parts := strings.Split(b, ":")
		if !filepath.IsAbs(parts[0]) {
			if s.OwnsVolume == nil || !s.OwnsVolume(parts[0]) {
				return nil, refuse(what, "-v %s: the volume %s is not this session's (only volumes it created; anonymous ones pass)", b, parts[0])
			}
			continue
		}
		if r := s.judgeSource("-v "+b, parts[0]); r != nil {
			return nil, r
		}
	}
	for _, m := range h.Mounts {
		switch m.Type {
		case "bind":
			if r := s.judgeSource("--mount source="+m.Source, m.Source); r != nil {
				return nil, r
			}
		case "tmpfs":
		case "volume":
			// The local driver's options mount what they name
			// (type=none,o=bind,device=/etc binds the machine's /etc).
			if o := m.VolumeOptions; o != nil && o.DriverConfig != nil && (o.DriverConfig.Name != "" && o.DriverConfig.Name != "local" || len(o.DriverConfig.Options) > 0) {
				return nil, refuse(what, "--mount type=volume,volume-driver=%s with volume-opt: a volume driver's options can mount the machine's paths and devices", o.DriverConfig.Name)
			}
			if m.Source != "" && (s.OwnsVolume == nil || !s.OwnsVolume(m.Source)) {
				return nil, refuse(what, "--mount source=%s: the volume is not this session's (only volumes it created; anonymous ones pass)", m.Source)
			}
		default:
			return nil, refuse(what, "--mount type=%s: only bind, tmpfs and volumes", m.Type)
		}
	}
	return s.rewrite(body)
}

// judgeSource judges a bind's host side: a host path within the
// workspace (after symbolic links), never a socket of Sockets; a name
// is not a host path and is refused (named volumes are judged before).
func (s Scope) judgeSource(flag, src string) *Refusal {
	const what = "container create"
	if !filepath.IsAbs(src) {
		return refuse(what, "%s: a bind's source is a host path", flag)
	}
	p := filepath.Clean(src)
	if s.Resolve != nil {
		r, err := s.Resolve(p)
		if err != nil {
			return refuse(what, "%s: %v", flag, err)
		}
		p = r
	}
	for _, sock := range s.Sockets {
		if p == filepath.Clean(sock) || filepath.Clean(src) == filepath.Clean(sock) {
			return refuse(what, "%s: the Docker socket would give the container the engine, unjudged", flag)
		}
	}
	if filepath.Base(p) == "docker.sock" {
		return refuse(what, "%s: the Docker socket would give the container the engine, unjudged", flag)
	}
	ws := filepath.Clean(s.Workspace)
	if s.Workspace == "" || ws == "/" {
		return refuse(what, "%s: the session has no workspace to bind (it runs in /)", flag)
	}
	if p != ws && !strings.HasPrefix(p, ws+"/") {
		return refuse(what, "%s: only paths within the session's workspace %s may be bound", flag, ws)
	}
	if s.Guarded != nil {
		guarded, err := s.Guarded()
		if err != nil {
			return refuse(what, "%s: %v", flag, err)
		}
		for _, g := range guarded {
			g = filepath.Clean(g)
			if p == g || strings.HasPrefix(g, p+"/") || strings.HasPrefix(p, g+"/") {
				return refuse(what, "%s: it would show %s, which the session's sandbox hides or makes read-only", flag, g)
			}
		}
	}
	return nil
}

// isSet reports whether a JSON field was given a value (not absent, not
// null).
func isSet(v json.RawMessage) bool {
	return len(v) > 0 && string(v) != "null"
}

// rewrite sets the session's label and the cgroup parent in body, keeping
// every other field as the client sent it (numbers as written).
func (s Scope) rewrite(body []byte) ([]byte, *Refusal) {
	m, err := decodeObject(body)
	if err != nil {
		return nil, refuse("container create", "its body is not a JSON object")
	}
	lk := keyFor(m, "Labels")
	labels, _ := m[lk].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	s.label(labels)
	m[lk] = labels
	hk := keyFor(m, "HostConfig")
	hc, _ := m[hk].(map[string]any)
	if hc == nil {
		hc = map[string]any{}
	}
	hc[keyFor(hc, "CgroupParent")] = s.CgroupParent
	m[hk] = hc
	out, err := json.Marshal(m)
	if err != nil {
		return nil, refuse("container create", "%v", err)
	}
	return out, nil
}

// label sets the session's labels in labels.
func (s Scope) label(labels map[string]any) {
	labels[SessionLabel] = s.Session
	if s.Root != "" {
		labels[RootLabel] = s.Root
	}
}

// decodeObject decodes a JSON object keeping its numbers as written.
func decodeObject(body []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// JudgeExec judges a POST /containers/{id}/exec body: no privileged
// exec.
func JudgeExec(body []byte) *Refusal {
	var e struct{ Privileged bool }
	if err := checkKeys(body); err != nil {
		return refuse("exec", "its body is not JSON the broker can read: %v", err)
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return refuse("exec", "its body is not JSON the broker can read: %v", err)
	}
	if e.Privileged {
		return refuse("exec", "--privileged gives the process every capability")
	}
	return nil
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// RegistryHost is the registry host an image reference names, as the
// engine contacts it: the first path element when it looks like a host
// (a dot, a port or localhost), else Docker Hub, whose API host is
// registry-1.docker.io.
func RegistryHost(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok || !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "registry-1.docker.io"
	}
	if first == "docker.io" || first == "index.docker.io" {
		return "registry-1.docker.io"
	}
	return first
}

// Endpoint is what the broker does with a request.
type Endpoint int

// The endpoints the broker knows; Refused is everything else.
const (
	Refused Endpoint = iota
	Pass             // no effect outside the engine's own answers (/_ping, /version, /info)
	Create           // POST /containers/create
	List             // GET /containers/json: filtered to the session's
	Own              // /containers/{ref}/... of a container of the session
	OwnExec          // POST /containers/{ref}/exec
	ExecOwn          // /exec/{id}/... of an exec of the session
	Pull             // POST /images/create
	Push             // POST /images/{name}/push
	Images           // GET /images/json, GET /images/{name}/json
	Build            // POST /build
)

var versionPrefix = regexp.MustCompile(`^/v[0-9]+\.[0-9]+/`)

// ownActions are the container actions a session may take on its own
// containers, by method.
var ownActions = map[string][]string{
	"POST":   {"start", "stop", "kill", "wait", "attach", "resize", "pause", "unpause", "restart", "rename"},
	"GET":    {"json", "logs", "top", "stats", "changes", "attach/ws", "archive"},
	"HEAD":   {"archive"},
	"PUT":    {"archive"},
	"DELETE": {""},
}

// Route says what the broker does with method and path (the request's
// path, version prefix or not), and the reference (container or exec id,
// image name) the path names.
func Route(method, path string) (Endpoint, string) {
	p := versionPrefix.ReplaceAllString(path, "/")
	if gopath.Clean(p) != p {
		// "/images/../containers/other/json" would name one thing here
		// and another to the engine's router.
		return Refused, ""
	}
	switch {
	case (method == "GET" || method == "HEAD") && p == "/_ping",
		method == "GET" && (p == "/version" || p == "/info"):
		return Pass, ""
	case method == "POST" && p == "/containers/create":
		return Create, ""
	case method == "GET" && p == "/containers/json":
		return List, ""
	case method == "POST" && p == "/images/create":
		return Pull, ""
	case method == "GET" && p == "/images/json":
		return Images, ""
	case method == "POST" && p == "/build":
		return Build, ""
	}
	if rest, ok := strings.CutPrefix(p, "/containers/"); ok {
		ref, action, _ := strings.Cut(rest, "/")
		if ref == "" {
			return Refused, ""
		}
		if method == "POST" && action == "exec" {
			return OwnExec, ref
		}
		if slices.Contains(ownActions[method], action) {
			return Own, ref
		}
		return Refused, ref
	}
	if ep, ref, ok := routeNetVol(method, p); ok {
		return ep, ref
	}
	if rest, ok := strings.CutPrefix(p, "/exec/"); ok {
		id, action, _ := strings.Cut(rest, "/")
		if id != "" && (method == "POST" && (action == "start" || action == "resize") || method == "GET" && action == "json") {
			return ExecOwn, id
		}
		return Refused, id
	}
	if rest, ok := strings.CutPrefix(p, "/images/"); ok {
		if name, ok := strings.CutSuffix(rest, "/push"); ok && method == "POST" {
			return Push, name
		}
		if name, ok := strings.CutSuffix(rest, "/json"); ok && method == "GET" {
			return Images, name
		}
	}
	return Refused, ""
}
