#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# After removal. deb purge, or rpm erase ($1 = 0) that kept no
# configuration: nothing of sluice stays (its configuration, audit log,
# state and the sluice group; preremove already removed sessions, cgroups
# and pins). A plain deb remove keeps the configuration and the group.
set -e
case "$1" in
purge)
	rm -rf /etc/sluice /var/log/sluice /run/sluice
	;;
0)
	rm -rf /var/log/sluice /run/sluice
	# rpm keeps changed configuration as .rpmsave: keep the group then.
	if [ -n "$(ls -A /etc/sluice 2>/dev/null)" ]; then
		exit 0
	fi
	rmdir /etc/sluice 2>/dev/null || true
	;;
*)
	exit 0
	;;
esac
if getent group sluice >/dev/null 2>&1; then
	groupdel sluice >/dev/null 2>&1 || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
