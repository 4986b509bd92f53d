#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# After install (deb: configure; rpm: $1 >= 1): the group whose members may
# start sessions through the daemon, and systemd told about the unit. The
# daemon is not started: its allowlist is the administrator's to write
# (/etc/sluice/network_allowlist.json; none means loopback only), then
# `systemctl enable --now sluice`.
set -e
if ! getent group sluice >/dev/null 2>&1; then
	if command -v groupadd >/dev/null 2>&1; then
		groupadd --system sluice
	else
		addgroup --system sluice
	fi
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
