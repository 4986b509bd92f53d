// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/audit"
	"github.com/sluice-dev/sluice/proxy"
)

// metrics are the daemon's Prometheus metrics. Per-session connection
// counters are read from the datapath at scrape time (the kernel keeps
// them per CPU); everything else is counted as it happens.
type metrics struct {
	reg        *prometheus.Registry
	dnsQueries *prometheus.CounterVec
	upstream   prometheus.Histogram
	events     *prometheus.CounterVec
	policy     *prometheus.CounterVec
	sandbox    *prometheus.CounterVec
	// permissions counts ask mode's events (permission_asked, _granted,
	// _denied, _timeout), every one, before the audit log's rate limit.
	permissions *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		dnsQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: dnsQueriesName, Help: dnsQueriesHelp,
		}, []string{"verdict"}),
		upstream: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_dns_upstream_duration_seconds", Help: "Round trip time of queries forwarded upstream.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_audit_events_total", Help: "Audit events, by type.",
		}, []string{"type"}),
		policy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_policy_reloads_total", Help: "Machine allowlist reloads, by result.",
		}, []string{"result"}),
	}
	m.sandbox = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_sandbox_denials_total", Help: "Refusals by sessions' Landlock domains (ptrace, pidfd_getfd, process_vm_*, /proc files, signal), read from the kernel's audit records; every one, before the audit log's rate limit.",
	}, []string{"access"})
	m.permissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_permission_events_total", Help: "Ask mode's prompts, by event: permission_asked, permission_granted, permission_denied, permission_timeout; every one, before the audit log's rate limit.",
	}, []string{"type"})
	m.reg.MustRegister(&dnsQueriesCollector{vec: m.dnsQueries, s: s}, m.upstream, m.events, m.policy, m.sandbox, m.permissions, &sessionCollector{s: s})
	for _, t := range []string{audit.PermissionAsked, audit.PermissionGranted, audit.PermissionDenied, audit.PermissionTimeout} {
		m.permissions.WithLabelValues(t)
	}
	for _, v := range []string{"forwarded", "cached", "refused", "servfail", "local", "other"} {
		m.dnsQueries.WithLabelValues(v)
	}
	return m
}

const (
	dnsQueriesName = "sluice_dns_queries_total"
	dnsQueriesHelp = "DNS queries of sessions, by verdict: the resolvers' (forwarded, cached, refused, servfail, local, other) and kernel, those the kernel DNS path judged and sent upstream itself, counted in the kernel since the datapath was created (on across daemon restarts, while the default path fails over to it)."
)

// descKernelQueries is sluice_dns_queries_total's descriptor (the same as
// the counter vector's), for the kernel path's share.
var descKernelQueries = prometheus.NewDesc(dnsQueriesName, dnsQueriesHelp, []string{"verdict"}, nil)

// dnsQueriesCollector is sluice_dns_queries_total: the resolvers' verdicts,
// counted as they answer, and verdict="kernel", read from the datapath at
// scrape time (the kernel path's queries never reach user space).
type dnsQueriesCollector struct {
	vec *prometheus.CounterVec
	s   *Server
}

func (c *dnsQueriesCollector) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

func (c *dnsQueriesCollector) Collect(ch chan<- prometheus.Metric) {
	c.vec.Collect(ch)
	// No counter (a kernel without the kernel path's programs): no series
	// rather than a zero that would claim it counts.
	if n, err := c.s.e.Datapath().KDNSForwarded(); err == nil {
		ch <- prometheus.MustNewConstMetric(descKernelQueries, prometheus.CounterValue, float64(n), "kernel")
	}
}

var (
	descSessions = prometheus.NewDesc("sluice_sessions", "Running sessions.", nil, nil)
	descConnects = prometheus.NewDesc("sluice_connections_total", "Connection attempts judged by the kernel, per session and verdict (loopback is not counted).", []string{"session", "verdict"}, nil)
	// Apart from sluice_connections_total: glibc tries nscd and
	// systemd-resolved's socket on every lookup, and counting those
	// refusals as denials would make the denied counter grow with every
	// name lookup and useless for alerting.
	descQuiet   = prometheus.NewDesc("sluice_quiet_refusals_total", "Refusals of the name-service sockets (nscd, systemd-resolved) that glibc tries on every lookup before files and DNS; expected, not denials, never logged.", []string{"session"}, nil)
	descLost    = prometheus.NewDesc("sluice_events_dropped_total", "Deny events lost because a session's ring buffer was full.", []string{"session"}, nil)
	descLearned = prometheus.NewDesc("sluice_learned_ips", "Addresses a session learned from DNS.", []string{"session"}, nil)
	descMapFill = prometheus.NewDesc("sluice_learned_map_fill_ratio", "Fill of the learned-IP map shared by all sessions.", nil, nil)

	descProxyRequests  = prometheus.NewDesc("sluice_proxy_requests_total", "Requests to a session's allowlist proxy, per session, protocol (connect, http, socks5) and verdict (allowed, refused, failed).", []string{"session", "protocol", "verdict"}, nil)
	descProxyMalformed = prometheus.NewDesc("sluice_proxy_malformed_total", "Requests a session's allowlist proxy refused as malformed.", []string{"session"}, nil)
	descProxyActive    = prometheus.NewDesc("sluice_proxy_active_connections", "Client connections open to a session's allowlist proxy.", []string{"session"}, nil)
	descProxyBytes     = prometheus.NewDesc("sluice_proxy_bytes_total", "Payload a session's allowlist proxy relayed, per direction (up: towards destinations).", []string{"session", "direction"}, nil)

	descNameChecks = prometheus.NewDesc("sluice_name_checks_total", "Connections to addresses a session learned for a name whose TLS SNI or HTTP Host was judged (in the kernel on ports 443 and 80, by its verifier on the ports an entry's verify: name adds), per verdict (allowed, refused; failed: allowed, but the address could not be reached).", []string{"session", "verdict"}, nil)
)

// sessionCollector reads the datapath's counters at scrape time.
type sessionCollector struct{ s *Server }

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSessions
	ch <- descConnects
	ch <- descQuiet
	ch <- descLost
	ch <- descLearned
	ch <- descMapFill
	ch <- descProxyRequests
	ch <- descProxyMalformed
	ch <- descProxyActive
	ch <- descProxyBytes
	ch <- descNameChecks
}

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	sessions := c.s.snapshot()
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(len(sessions)))
	learnedTotal := 0
	for _, ss := range sessions {
		cnt, err := ss.Enforced().Counters()
		if err == nil {
			name := ss.Info.Name
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Allowed), name, "allowed")
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Denied), name, "denied")
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Audited), name, "audited")
			ch <- prometheus.MustNewConstMetric(descQuiet, prometheus.CounterValue, float64(cnt.Quiet), name)
			ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(cnt.EventsLost), name)
		}
		if r := ss.Enforced().Resolver(); r != nil {
			n := r.LearnedCount()
			learnedTotal += n
			ch <- prometheus.MustNewConstMetric(descLearned, prometheus.GaugeValue, float64(n), ss.Info.Name)
		}
		if st, ok := ss.Enforced().ProxyStats(); ok {
			collectProxy(ch, ss.Info.Name, st)
		}
		if st, ok := ss.Enforced().VerifierStats(); ok {
			// The verifier's ("verify": "name" ports) and the kernel's
			// (ports 443 and 80) together.
			checked, refused := st.Checked.Load(), st.Refused.Load()
			if err == nil {
				checked += cnt.NameChecked
				refused += cnt.NameRefused
			}
			ch <- prometheus.MustNewConstMetric(descNameChecks, prometheus.CounterValue, float64(checked-refused), ss.Info.Name, "allowed")
			ch <- prometheus.MustNewConstMetric(descNameChecks, prometheus.CounterValue, float64(refused), ss.Info.Name, "refused")
			ch <- prometheus.MustNewConstMetric(descNameChecks, prometheus.CounterValue, float64(st.Failed.Load()), ss.Info.Name, "failed")
		}
	}
	if capacity := c.s.e.Datapath().LearnedCapacity(); capacity > 0 {
		ch <- prometheus.MustNewConstMetric(descMapFill, prometheus.GaugeValue, float64(learnedTotal)/float64(capacity))
	}
}

// collectProxy sends one session proxy's counters.
func collectProxy(ch chan<- prometheus.Metric, session string, st proxy.Stats) {
	for _, p := range []struct {
		name string
		c    proxy.Counters
	}{{"connect", st.Connect}, {"http", st.HTTP}, {"socks5", st.SOCKS5}} {
		ch <- prometheus.MustNewConstMetric(descProxyRequests, prometheus.CounterValue, float64(p.c.Allowed), session, p.name, "allowed")
		ch <- prometheus.MustNewConstMetric(descProxyRequests, prometheus.CounterValue, float64(p.c.Refused), session, p.name, "refused")
		ch <- prometheus.MustNewConstMetric(descProxyRequests, prometheus.CounterValue, float64(p.c.Failed), session, p.name, "failed")
	}
	ch <- prometheus.MustNewConstMetric(descProxyMalformed, prometheus.CounterValue, float64(st.Malformed), session)
	ch <- prometheus.MustNewConstMetric(descProxyActive, prometheus.GaugeValue, float64(st.Active), session)
	ch <- prometheus.MustNewConstMetric(descProxyBytes, prometheus.CounterValue, float64(st.BytesUp), session, "up")
	ch <- prometheus.MustNewConstMetric(descProxyBytes, prometheus.CounterValue, float64(st.BytesDown), session, "down")
}
