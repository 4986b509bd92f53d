package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
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
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		dnsQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_dns_queries_total", Help: "DNS queries answered by sessions' resolvers, by verdict.",
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
	m.reg.MustRegister(m.dnsQueries, m.upstream, m.events, m.policy, &sessionCollector{s: s})
	for _, v := range []string{"forwarded", "cached", "refused", "servfail", "local", "other"} {
		m.dnsQueries.WithLabelValues(v)
	}
	return m
}

var (
	descSessions = prometheus.NewDesc("sluice_sessions", "Running sessions.", nil, nil)
	descConnects = prometheus.NewDesc("sluice_connections_total", "Connection attempts judged by the kernel, per session and verdict (loopback is not counted).", []string{"session", "verdict"}, nil)
	descLost     = prometheus.NewDesc("sluice_events_dropped_total", "Deny events lost because a session's ring buffer was full.", []string{"session"}, nil)
	descLearned  = prometheus.NewDesc("sluice_learned_ips", "Addresses a session learned from DNS.", []string{"session"}, nil)
	descMapFill  = prometheus.NewDesc("sluice_learned_map_fill_ratio", "Fill of the learned-IP map shared by all sessions.", nil, nil)
)

// sessionCollector reads the datapath's counters at scrape time.
type sessionCollector struct{ s *Server }

func (c *sessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSessions
	ch <- descConnects
	ch <- descLost
	ch <- descLearned
	ch <- descMapFill
}

func (c *sessionCollector) Collect(ch chan<- prometheus.Metric) {
	sessions := c.s.snapshot()
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(len(sessions)))
	learnedTotal := 0
	for _, ss := range sessions {
		cnt, err := ss.s.Counters()
		if err == nil {
			name := ss.info.Name
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Allowed), name, "allowed")
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Denied), name, "denied")
			ch <- prometheus.MustNewConstMetric(descConnects, prometheus.CounterValue, float64(cnt.Audited), name, "audited")
			ch <- prometheus.MustNewConstMetric(descLost, prometheus.CounterValue, float64(cnt.EventsLost), name)
		}
		if r := ss.s.Resolver(); r != nil {
			n := r.LearnedCount()
			learnedTotal += n
			ch <- prometheus.MustNewConstMetric(descLearned, prometheus.GaugeValue, float64(n), ss.info.Name)
		}
	}
	if capacity := c.s.e.Datapath().LearnedCapacity(); capacity > 0 {
		ch <- prometheus.MustNewConstMetric(descMapFill, prometheus.GaugeValue, float64(learnedTotal)/float64(capacity))
	}
}
