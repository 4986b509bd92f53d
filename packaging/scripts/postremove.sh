#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# After removal. deb purge, or rpm erase ($1 = 0) that kept no
# configuration: nothing of sluice stays (its configuration, audit log,
# state and the sluice group; preremove already removed sessions, cgroups
# and pins). A plain deb remove keeps the configuration and the group.
# Every removal tells systemd that the unit is gone; an upgrade (deb
# upgrade, rpm $1 = 1) leaves all to the new package's postinstall.
set -e
delgroup=
case "${1:-}" in
purge)
	rm -rf /etc/sluice /var/log/sluice /run/sluice
	delgroup=1
	;;
0)
	rm -rf /var/log/sluice /run/sluice
	# rpm keeps changed configuration as .rpmsave: keep the group then.
	if [ -z "$(ls -A /etc/sluice 2>/dev/null)" ]; then
		rmdir /etc/sluice 2>/dev/null || true
		delgroup=1
	fi
	;;
remove) ;;
*)
	exit 0
	;;
esac
if [ -n "$delgroup" ] && getent group sluice >/dev/null 2>&1; then
	groupdel sluice >/dev/null 2>&1 || true
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
