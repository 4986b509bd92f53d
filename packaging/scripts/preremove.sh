#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Before removal (deb: remove; rpm: $1 = 0), not before an upgrade: stop the
# daemon and remove every session, cgroup, pin and state sluice put on the
# machine (`sluice cleanup`). A session's command is killed with it: without
# sluice nothing would confine it.
set -e
case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac
if [ -d /run/systemd/system ]; then
	systemctl disable --now sluice.service >/dev/null 2>&1 || true
fi
sluice cleanup >/dev/null 2>&1 || true
exit 0
