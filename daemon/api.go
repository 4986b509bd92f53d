package daemon

import (
	"encoding/json"
	"time"
)

// Where clients find the daemon.
const (
	DefaultSocket = "/run/sluice/sluice.sock"
	SocketEnv     = "SLUICE_SOCKET" // overrides DefaultSocket; --socket overrides both
)

// API types, shared by the daemon and its clients. docs/api.md documents
// them; field names are part of the interface.

// CreateRequest asks for a session running Argv. The client's stdin,
// stdout and stderr travel with the request as SCM_RIGHTS.
type CreateRequest struct {
	Allow []string `json:"allow"` // entries; empty (and no allowlist): the whole machine allowlist
	// Allowlist is a network_allowlist.json document whose entries join
	// Allow, keeping what plain strings cannot say (allow_private).
	Allowlist json.RawMessage `json:"allowlist,omitempty"`
	Audit     bool            `json:"audit,omitempty"`      // allow everything, report what would be denied
	User      string          `json:"user,omitempty"`       // USER[:GROUP]; root clients only
	PidsMax   int64           `json:"pids_max,omitempty"`   // cgroup pids.max
	MemoryMax int64           `json:"memory_max,omitempty"` // cgroup memory.max, bytes
	Argv      []string        `json:"argv"`
	Path      string          `json:"path,omitempty"` // argv[0] resolved by the client's PATH
	// NoProxyEnv leaves the proxy variables out of the command's
	// environment (the session's proxy still runs).
	NoProxyEnv bool     `json:"no_proxy_env,omitempty"`
	Env        []string `json:"env,omitempty"`
	Dir        string   `json:"dir,omitempty"`
	// ShowPaths exempts these hidden paths (and what is below them) for
	// this session; never the machine allowlist's hidden_paths.
	ShowPaths []string `json:"show_paths,omitempty"`
	// ShareProcesses turns process isolation off; refused for a caller
	// that is itself confined.
	ShareProcesses bool `json:"share_processes,omitempty"`
}

// SessionInfo describes a session.
type SessionInfo struct {
	Name    string    `json:"name"`
	UID     uint32    `json:"uid"`
	Created time.Time `json:"created"`
	Argv    []string  `json:"argv"`
	// Parent is the session whose process created this one through the
	// API; such a session is held to its parent's policy.
	Parent     string   `json:"parent,omitempty"`
	PID        int      `json:"pid,omitempty"` // the command's pid, 0 after a re-adoption
	Policy     []string `json:"policy"`
	Audit      bool     `json:"audit,omitempty"`
	Processes  int      `json:"processes"`
	Allowed    uint64   `json:"allowed"`
	Denied     uint64   `json:"denied"`
	Audited    uint64   `json:"audited"`
	LearnedIPs int      `json:"learned_ips"`
	Recent     []Event  `json:"recent_denials,omitempty"`
}

// Event is one line of a session's story, as streamed to clients and
// written to the audit log (docs/audit.md).
type Event struct {
	Time    time.Time `json:"time"`
	Type    string    `json:"type"`
	Session string    `json:"session,omitempty"`
	PID     uint32    `json:"pid,omitempty"`
	Comm    string    `json:"comm,omitempty"`
	Exe     string    `json:"exe,omitempty"`
	UID     *uint32   `json:"uid,omitempty"`
	Dst     string    `json:"dst,omitempty"`
	Port    uint16    `json:"port,omitempty"`
	Proto   string    `json:"proto,omitempty"`
	Host    string    `json:"host,omitempty"` // the name a destination was learned from, or the DNS name
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"` // the line a user reads
	Actor   *uint32   `json:"actor_uid,omitempty"`
	Entries []string  `json:"entries,omitempty"`
	Exit    *int      `json:"exit,omitempty"`
	// Suppressed is how many deny events an events_suppressed line stands
	// for.
	Suppressed int `json:"suppressed,omitempty"`
}

// Event types.
const (
	EventSessionStarted = "session_started"
	EventSessionEnded   = "session_ended"
	EventSessionAdopted = "session_adopted"
	EventEgressDenied   = "egress_denied"
	EventEgressAudit    = "egress_would_deny"
	EventDNSRefused     = "dns_refused"
	EventDNSAudit       = "dns_would_refuse"
	EventRebinding      = "dns_rebinding_dropped"
	EventRebindingAudit = "dns_rebinding_would_drop"
	EventCapReached     = "dns_cap_reached"
	EventMapFull        = "map_full"
	EventUpstreamFailed = "dns_upstream_failed"
	EventProxyRefused   = "proxy_refused"
	EventPolicyChanged  = "policy_changed"
	EventPolicyInvalid  = "policy_invalid"
	EventSessionRefused = "session_refused"
	// EventPolicyChangeRefused: a caller was refused (403) a change to the
	// machine allowlist. An agent trying to open hosts for itself is what
	// an auditor most wants to see, so the attempt is kept, not only the
	// changes that were made.
	EventPolicyChangeRefused = "policy_change_refused"
	EventSuppressed          = "events_suppressed"
	EventDaemonStarted       = "daemon_started"
	EventDaemonStopped       = "daemon_stopped"
)

// StreamMessage is one NDJSON line of a create response: first Session,
// then Events, last Exit.
type StreamMessage struct {
	Session *SessionInfo `json:"session,omitempty"`
	Event   *Event       `json:"event,omitempty"`
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
}
