#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs inside the fresh Debian container of packaging/test-deb.sh.
set -euo pipefail
say() { printf -- '-- %s\n' "$*"; }

say "dpkg -i"
dpkg -i /tmp/sluice.deb
getent group sluice
test -x /usr/bin/sluice -a -x /usr/bin/sluice-ci
test -f /usr/lib/systemd/system/sluice.service -a -f /etc/sluice/sluice.json
test -f /usr/share/bash-completion/completions/sluice -a -f /usr/share/zsh/vendor-completions/_sluice
test -f /usr/share/fish/vendor_completions.d/sluice.fish -a -f /usr/share/man/man1/sluice-run.1.gz
test -f /usr/share/man/man1/sluice-ci.1.gz -a -f /usr/share/doc/sluice/copyright
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' /usr/share/doc/sluice/copyright
# What the maintainer scripts run (groupadd, groupdel) is declared.
dpkg-query -W -f '${Depends}\n' sluice | grep -qw passwd

say "sluice check"
sluice check || true

say "the daemon, by hand (no systemd here)"
sluice daemon >/tmp/daemon.log 2>&1 &
daemon=$!
for _ in $(seq 150); do
	if out=$(sluice status 2>/dev/null) && [[ $out == daemon:* ]]; then break; fi
	sleep 0.1
done
sluice status

say "a confined command: loopback only"
# Unconfined, the address is merely unreachable (no network); confined,
# sluice refuses it first and says so.
twin=$(setpriv --reuid 65534 --regid 65534 --clear-groups -- bash -c 'exec 3<>/dev/tcp/203.0.113.1/80' 2>&1 || true)
echo "unconfined: $twin"
[[ $twin == *"unreachable"* ]]
set +e
out=$(sluice run --user 65534:65534 -- bash -c 'exec 3<>/dev/tcp/203.0.113.1/80' 2>&1)
code=$?
set -e
echo "$out"
[[ $code -ne 0 && $out == *"sluice: denied"*"203.0.113.1:80/tcp"* && $out == *"Operation not permitted"* ]]

say "stop the daemon, purge"
kill -TERM "$daemon"
wait "$daemon" || true
dpkg --purge sluice

say "nothing left"
left=0
for p in /usr/bin/sluice /usr/bin/sluice-ci /etc/sluice /var/log/sluice /run/sluice /usr/lib/systemd/system/sluice.service \
	"/sys/fs/bpf/$SLUICE_INSTANCE" "$CGMOUNT/$SLUICE_INSTANCE"; do
	if [[ -e $p ]]; then echo "left behind: $p" >&2; left=1; fi
done
if getent group sluice; then echo "left behind: the group sluice" >&2; left=1; fi
[[ $left -eq 0 ]]
echo "inside: ok"
