#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# After install (deb: configure [OLD-VERSION]; rpm: $1 = the number of
# sluice packages installed, 2 or more on an upgrade): the group whose
# members may start sessions through the daemon, and systemd told about the
# unit. A fresh install does not start the daemon: its allowlist is the
# administrator's to write (/etc/sluice/network_allowlist.json; none means
# loopback only), then `systemctl enable --now sluice`. An upgrade restarts
# a running daemon (try-restart: only if it runs), so that the new binary
# serves; sessions keep running confined and the new daemon re-adopts them
# (the unit's KillMode=process).
set -e
upgrade=
case "${1:-}" in
configure) if [ -n "${2:-}" ]; then upgrade=1; fi ;;
'' | *[!0-9]*) ;;
*) if [ "$1" -ge 2 ]; then upgrade=1; fi ;;
esac
if ! getent group sluice >/dev/null 2>&1; then
	if command -v groupadd >/dev/null 2>&1; then
		groupadd --system sluice
	else
		addgroup --system sluice
	fi
fi
# Only where systemd runs: in a container or a chroot there is no manager
# to tell.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	if [ -n "$upgrade" ]; then
		systemctl try-restart sluice.service >/dev/null 2>&1 || true
	fi
fi
exit 0
