// SPDX-License-Identifier: Apache-2.0

package audit

import "time"

// Event is one line of a session's story, as streamed to clients and
// written to the audit log (docs/audit.md). The JSON field names are the
// documented format.
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
	// Access, Target and TargetPID describe a sandbox_denied line: what
	// the session's Landlock domain refused ("ptrace", "pidfd_getfd",
	// "signal", ...) and the process it reached for ("bash[1234]").
	Access    string `json:"access,omitempty"`
	Target    string `json:"target,omitempty"`
	TargetPID uint32 `json:"target_pid,omitempty"`
	// Suppressed is how many deny events an events_suppressed line stands
	// for.
	Suppressed int `json:"suppressed,omitempty"`
	// Prompt, Scope and AnsweredBy describe a permission_* line (ask
	// mode): the prompt's id, how far an approval reaches (once, session,
	// always), and who answered ("user:NAME"; "timeout" for a timeout).
	Prompt     string `json:"prompt,omitempty"`
	Scope      string `json:"scope,omitempty"`
	AnsweredBy string `json:"answered_by,omitempty"`
	// Job is the CI job identity of a pod's session (`sluice node`): the
	// pod's namespace/name and uid, GitLab's job.runner.gitlab.com/*
	// annotations, ARC's actions.github.com/* labels (package podpolicy).
	// The pod's own claims, for people; nothing is decided on them.
	Job map[string]string `json:"job,omitempty"`
}

// Event types, the values of Event.Type.
const (
	SessionStarted = "session_started"
	SessionEnded   = "session_ended"
	SessionAdopted = "session_adopted"
	EgressDenied   = "egress_denied"
	EgressAudit    = "egress_would_deny"
	DNSRefused     = "dns_refused"
	DNSAudit       = "dns_would_refuse"
	Rebinding      = "dns_rebinding_dropped"
	RebindingAudit = "dns_rebinding_would_drop"
	CapReached     = "dns_cap_reached"
	MapFull        = "map_full"
	UpstreamFailed = "dns_upstream_failed"
	ProxyRefused   = "proxy_refused"
	// NameRefused: a connection to an address the session learned for an
	// allowed name carried another name (TLS SNI, HTTP Host), or none
	// (package namecheck); NameAudit: it would have been refused.
	NameRefused = "name_refused"
	NameAudit   = "name_would_refuse"
	// SandboxDenied: the session's Landlock domain refused a process of
	// the session access to one outside it (ptrace, pidfd_getfd,
	// process_vm_*, /proc/PID/mem, a signal), read from the kernel's
	// audit records (package kaudit).
	SandboxDenied  = "sandbox_denied"
	PolicyChanged  = "policy_changed"
	PolicyInvalid  = "policy_invalid"
	SessionRefused = "session_refused"
	// PolicyChangeRefused: a caller was refused (403) a change to the
	// machine allowlist. An agent trying to open hosts for itself is what
	// an auditor most wants to see, so the attempt is kept, not only the
	// changes that were made.
	PolicyChangeRefused = "policy_change_refused"
	Suppressed          = "events_suppressed"
	// Ask mode (package prompts): a session asked a person about a name
	// or an address its policy lacks, and the person approved it, denied
	// it, or did not answer in time (denied automatically).
	PermissionAsked   = "permission_asked"
	PermissionGranted = "permission_granted"
	PermissionDenied  = "permission_denied"
	PermissionTimeout = "permission_timeout"
	// DockerRefused: a session's Docker socket (package dockerbroker)
	// refused a request: a container with more than the session has, a
	// container the session did not create, a registry its policy lacks,
	// an endpoint sluice does not judge.
	DockerRefused = "docker_refused"
	DaemonStarted = "daemon_started"
	DaemonStopped = "daemon_stopped"
)

// Types lists every event type, in the order docs/audit.md gives them.
var Types = []string{DaemonStarted, DaemonStopped, SessionStarted, SessionAdopted, SessionEnded,
	EgressDenied, EgressAudit, DNSRefused, DNSAudit, Rebinding, RebindingAudit, CapReached, MapFull,
	UpstreamFailed, ProxyRefused, NameRefused, NameAudit, SandboxDenied, PolicyChanged, PolicyInvalid, SessionRefused, PolicyChangeRefused,
	DockerRefused, PermissionAsked, PermissionGranted, PermissionDenied, PermissionTimeout, Suppressed}
