//go:build !linux

package main

import "github.com/sluice-dev/sluice/dnsresolver"

// auditDNS: the audit form of resolver events is Linux-only for now (it
// lives with the daemon's converters); the terminal still shows them.
func auditDNS(*runAudit, dnsresolver.Event) {}
