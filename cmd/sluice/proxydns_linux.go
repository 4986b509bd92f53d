package main

import (
	"github.com/sluice-dev/sluice/daemon"
	"github.com/sluice-dev/sluice/dnsresolver"
)

// auditDNS writes a resolver event of a userspace session's proxy to the
// audit log. No program asked: the proxy did, so there is no owner.
func auditDNS(audit *runAudit, ev dnsresolver.Event) {
	if audit.on() {
		audit.write(daemon.DNSEvent("", ev, ""))
	}
}
