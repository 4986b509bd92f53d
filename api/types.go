// SPDX-License-Identifier: Apache-2.0

package api

import (
	"encoding/json"
	"time"

	"github.com/sluice-dev/sluice/audit"
)

// Where clients find the daemon.
const (
	DefaultSocket = "/run/sluice/sluice.sock"
	SocketEnv     = "SLUICE_SOCKET" // overrides DefaultSocket; --socket overrides both
)

// CreateRequest asks for a session running Argv. The client's stdin,
// stdout and stderr travel with the request as SCM_RIGHTS.
type CreateRequest struct {
	Allow []string `json:"allow"` // entries; empty (and no allowlist): the whole machine allowlist
	// Allowlist is a network_allowlist.json document whose entries join
	// Allow, keeping what plain strings cannot say (allow_private).
	Allowlist json.RawMessage `json:"allowlist,omitempty"`
	Audit     bool            `json:"audit,omitempty"` // allow everything, report what would be denied
	// Ask: a name (or address) the policy lacks is held while a person
	// decides (docs/ask.md); only through the daemon.
	Ask       bool     `json:"ask,omitempty"`
	User      string   `json:"user,omitempty"`       // USER[:GROUP]; root clients only
	PidsMax   int64    `json:"pids_max,omitempty"`   // cgroup pids.max
	MemoryMax int64    `json:"memory_max,omitempty"` // cgroup memory.max, bytes
	Argv      []string `json:"argv"`
	Path      string   `json:"path,omitempty"` // argv[0] resolved by the client's PATH
	// NoProxyEnv leaves the proxy variables out of the command's
	// environment (the session's proxy still runs).
	NoProxyEnv bool     `json:"no_proxy_env,omitempty"`
	Env        []string `json:"env,omitempty"`
	Dir        string   `json:"dir,omitempty"`
	// ShowPaths exempts these hidden paths (and what is below them) for
	// this session; never the machine allowlist's hidden_paths.
	ShowPaths []string `json:"show_paths,omitempty"`
	// ReadOnlyPaths are absolute, clean paths (directories or files) that
	// the session's mount namespace makes read-only, with everything below
	// them, besides the daemon's own read-only paths, which a session
	// cannot remove. Each must exist in the caller's view of the file
	// system.
	ReadOnlyPaths []string `json:"read_only_paths,omitempty"`
	// ShareProcesses turns process isolation off; refused for a caller
	// that is itself confined.
	ShareProcesses bool `json:"share_processes,omitempty"`
	// AllowUserNamespaces lets the command create user namespaces, in which it
	// could mount over allowed unix socket names; refused for a caller
	// inside a session.
	AllowUserNamespaces bool `json:"allow_userns,omitempty"`
	// Docker gives the session a Docker API socket served by sluice
	// (DOCKER_HOST), which passes to the engine only what it judges
	// (docs/docker.md).
	Docker bool `json:"docker,omitempty"`
	// DockerHost is the engine's socket the broker forwards to (a path or
	// unix://path); empty: /var/run/docker.sock. Root callers only.
	DockerHost string `json:"docker_host,omitempty"`
}

// SessionInfo describes a session.
type SessionInfo struct {
	Name    string    `json:"name"`
	UID     uint32    `json:"uid"`
	Created time.Time `json:"created"`
	Argv    []string  `json:"argv"`
	// Parent is the session whose process created this one through the
	// API; such a session is held to its parent's policy.
	Parent string   `json:"parent,omitempty"`
	PID    int      `json:"pid,omitempty"` // the command's pid, 0 after a re-adoption
	Policy []string `json:"policy"`
	// PolicyName is a container session's named policy (its sluice.policy
	// label): the name, "(machine)" without a label, or the label with
	// "(unknown: loopback only)".
	PolicyName string        `json:"policy_name,omitempty"`
	Audit      bool          `json:"audit,omitempty"`
	Ask        bool          `json:"ask,omitempty"`
	Processes  int           `json:"processes"`
	Allowed    uint64        `json:"allowed"`
	Denied     uint64        `json:"denied"`
	Audited    uint64        `json:"audited"`
	LearnedIPs int           `json:"learned_ips"`
	Recent     []audit.Event `json:"recent_denials,omitempty"`
	// Hidden are the paths the session's sandbox covered when it started
	// (credential files and directories), for the client to name.
	Hidden []string `json:"hidden,omitempty"`
}

// StreamMessage is one NDJSON line of a create response: first Session,
// then Events, last Exit.
type StreamMessage struct {
	Session *SessionInfo `json:"session,omitempty"`
	Event   *audit.Event `json:"event,omitempty"`
	Exit    *int         `json:"exit,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// AllowRequest adds or removes machine allowlist entries.
type AllowRequest struct {
	Entries []string `json:"entries"`
	Owner   string   `json:"owner,omitempty"`
}

// RevokeRequest removes an owner's entries.
type RevokeRequest struct {
	Owner string `json:"owner"`
}

// RevokeResponse says what a revoke kept because other owners need it.
type RevokeResponse struct {
	Removed []string `json:"removed"`
	Kept    []string `json:"kept"`
}

// SignalRequest forwards a signal to a session's command.
type SignalRequest struct {
	Signal string `json:"signal"` // TERM, INT, HUP, KILL, ...
}

// ErrorResponse is the body of every 4xx/5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
}

// Status is the daemon's status.
type Status struct {
	Version   string `json:"version"`
	Sessions  int    `json:"sessions"`
	Allowlist string `json:"allowlist"`
	Entries   int    `json:"entries"`
	// DNSPath is the DNS path of the daemon's sessions (auto, kernel or
	// resolver), so that `sluice check` can say which is in force.
	DNSPath string `json:"dns_path,omitempty"`
}

// PromptAnswer is the body of POST /v1/prompts/{id}.
type PromptAnswer struct {
	// Decision is "approve" or "deny".
	Decision string `json:"decision"`
	// Scope of an approval: "once" (the default), "session", "always".
	Scope string `json:"scope,omitempty"`
}
