#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# inside.sh runs as a oneshot unit in a container whose PID 1 is systemd (systemd_linux_test.go
# boots it with systemd-nspawn). It checks that sluice's sessions are transient scopes in
# sluice.slice, that they stay confined and are re-adopted across `systemctl restart sluice`,
# and writes its verdict to /sluice-test.log, whose last line is "EXIT 0" when every check held.
# Every wait is bounded; the container powers off at the end whatever happened.
exec >/sluice-test.log 2>&1
set -u
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
finish() {
	echo "EXIT $1"
	systemctl --no-block start poweroff.target
	exit "$1"
}
fail() {
	echo "FAIL: $*"
	tail -n 5 /tmp/t/*.out
	journalctl --no-pager -n 40 -u sluice.service
	finish 1
}
ok() { echo "ok: $*"; }
# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds or time is up.
wait_for() {
	local n=$(($1 * 10))
	shift
	until "$@" >/dev/null 2>&1; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.1
	done
}
slice=/sys/fs/cgroup/sluice.slice
scopes() { ls -d "$slice"/sluice-run-*.scope 2>/dev/null; }
has_scope() { [ -n "$(scopes)" ]; }
no_scope() { [ -z "$(scopes)" ]; }

mkdir -p /tmp/t && chmod 1777 /tmp/t
cat >/tmp/t/strict.json <<'EOF'
{"allowed_hosts": [{"host": "203.0.113.7"}], "loopback": "session"}
EOF
cat >/tmp/t/open.json <<'EOF'
{"allowed_hosts": [{"host": "203.0.113.7"}]}
EOF
# probe NAME: the command of a session: it waits for /tmp/t/NAME.go, then connects to a
# loopback port where nothing listens. "Operation not permitted" is sluice's refusal;
# "Connection refused" means the connection was let through to the (empty) port.
probe() {
	echo "while [ ! -e /tmp/t/$1.go ]; do sleep 0.1; done; (exec 3<>/dev/tcp/127.0.0.1/9) 2>/tmp/t/$1.err; echo \$? >/tmp/t/$1.done"
}
verdict() { # NAME WANT
	touch "/tmp/t/$1.go"
	wait_for 20 test -s "/tmp/t/$1.done" || fail "session $1: its probe never finished"
	grep -q "$2" "/tmp/t/$1.err" || fail "session $1: connect: want '$2', got: $(cat "/tmp/t/$1.err")"
	ok "session $1: connect to a refused loopback port: $2"
}

echo "--- sluice check"
sluice check 2>&1
sluice check 2>&1 | grep "session cgroups" || fail "sluice check prints no 'session cgroups' line"
sluice check 2>&1 | grep "session cgroups" | grep -q "transient scope" || fail "sluice check does not say sessions are transient scopes"
ok "sluice check says sessions are transient scopes"
limits=()
if grep -qw pids "$slice/cgroup.controllers" 2>/dev/null; then limits+=(--pids-max 64); fi
if grep -qw memory "$slice/cgroup.controllers" 2>/dev/null; then limits+=(--memory-max 256M); fi

echo "--- sudo sluice run without a daemon"
sluice run --user nobody:nogroup --allowlist /tmp/t/strict.json -- bash -c "$(probe solo)" &
solo=$!
wait_for 20 has_scope || fail "no scope in sluice.slice for a daemonless session"
scope=$(basename "$(scopes)")
ok "daemonless session is $scope"
systemctl status --no-pager "$scope" | grep -q "sluice.slice" || fail "systemctl status $scope does not place it in sluice.slice"
verdict solo "Operation not permitted"
wait $solo
wait_for 10 no_scope || fail "the daemonless session's scope stayed after its end: $(scopes)"
ok "its scope is gone after the session"

echo "--- the daemon unit"
# The machine allowlist bounds what a session may ask the daemon for.
mkdir -p /etc/sluice
echo '{"allowed_hosts": [{"host": "203.0.113.0/24"}]}' >/etc/sluice/network_allowlist.json
systemctl start sluice.service || fail "systemctl start sluice failed"
wait_for 20 test -S /run/sluice/sluice.sock || fail "the daemon's socket did not appear"
sluice run --user nobody:nogroup --allowlist /tmp/t/strict.json "${limits[@]}" -- bash -c "$(probe strict)" >/tmp/t/strict.out 2>&1 &
strict=$!
sluice run --user nobody:nogroup --allowlist /tmp/t/open.json -- bash -c "$(probe open)" >/tmp/t/open.out 2>&1 &
open=$!
wait_for 20 sh -c "[ \$(ls -d $slice/sluice-run-*.scope | wc -l) -eq 2 ]" || fail "want 2 scopes in sluice.slice, have: $(scopes)"
systemd-cgls --no-pager /sluice.slice
systemd-cgls --no-pager /sluice.slice | grep -c "sluice-run-.*\.scope" | grep -qx 2 || fail "systemd-cgls does not show both sessions in sluice.slice"
ok "both sessions are scopes in sluice.slice (systemd-cgls)"
for s in $(scopes); do
	[ -n "$(cat "$s/cgroup.procs")" ] || fail "$s holds no process"
	[ "$(systemctl show -P Delegate "$(basename "$s")")" = yes ] || fail "$(basename "$s") is not delegated"
done
ok "each scope holds its command and has Delegate=yes"
case " ${limits[*]} " in
*" --pids-max "*)
	grep -lx 64 "$slice"/sluice-run-*.scope/pids.max >/dev/null || fail "--pids-max 64: no scope has pids.max 64"
	systemctl show -P TasksMax $(cd "$slice" && ls -d sluice-run-*.scope) | grep -qx 64 || fail "--pids-max 64: no scope has TasksMax=64"
	ok "--pids-max 64 is pids.max and TasksMax of the scope"
	;;
*) echo "note: systemd offers sluice.slice no pids controller here (a hybrid host): --pids-max not tried" ;;
esac
case " ${limits[*]} " in
*" --memory-max "*)
	grep -lx 268435456 "$slice"/sluice-run-*.scope/memory.max >/dev/null || fail "--memory-max 256M: no scope has memory.max 268435456"
	systemctl show -P MemoryMax $(cd "$slice" && ls -d sluice-run-*.scope) | grep -qx 268435456 || fail "--memory-max 256M: no scope has MemoryMax=268435456"
	ok "--memory-max 256M is memory.max and MemoryMax of the scope"
	;;
*) echo "note: systemd offers sluice.slice no memory controller here (a hybrid host): --memory-max not tried" ;;
esac
cat "$slice/cgroup.controllers"

echo "--- a process in sluice.slice outside any session"
# The container has no route but loopback: a connect that sluice lets through fails with
# "Network is unreachable" without sending anything, one that it refuses with EPERM.
outside=$( (exec 3<>/dev/tcp/203.0.113.7/80) 2>&1)
case "$outside" in
*"Network is unreachable"*) ok "outside sluice.slice: $outside" ;;
*) fail "outside sluice.slice, want 'Network is unreachable', got: $outside" ;;
esac
intruder=$(timeout 20 systemd-run --quiet --scope --slice=sluice.slice --unit=sluice-intruder.scope \
	bash -c '(exec 3<>/dev/tcp/203.0.113.7/80) 2>&1; exit 0' 2>&1)
case "$intruder" in
*"Operation not permitted"*) ok "a scope in sluice.slice that is no session is refused: $intruder" ;;
*) fail "a scope in sluice.slice that is no session: want 'Operation not permitted', got: $intruder" ;;
esac

echo "--- a daemon session before any restart"
sluice run --user nobody:nogroup --allowlist /tmp/t/strict.json -- bash -c "$(probe pre)" >/tmp/t/pre.out 2>&1 &
pre=$!
verdict pre "Operation not permitted"
wait_for 20 sh -c "! kill -0 $pre 2>/dev/null" || fail "session pre: its client did not end"

echo "--- systemctl restart sluice"
before=$(scopes)
systemctl restart sluice.service || fail "systemctl restart sluice failed"
wait_for 20 test -S /run/sluice/sluice.sock || fail "the restarted daemon's socket did not appear"
sleep 1
[ "$(scopes)" = "$before" ] || fail "the scopes changed across the restart: before $before, after $(scopes)"
journalctl --no-pager -u sluice.service | grep -i adopt
for s in $before; do
	[ -n "$(cat "$s/cgroup.procs")" ] || fail "$s lost its command across the restart"
done
ok "the scopes and their commands survived the restart"
sluice status 2>&1 | tee /tmp/t/status
grep -qx "sessions: 2" /tmp/t/status || fail "sluice status after the restart does not count both sessions"
for n in strict open; do
	wait_for 20 grep -q "daemon restarted; session sluice-run-.*\.scope goes on" /tmp/t/$n.out || fail "session $n: its client did not rejoin the restarted daemon"
done
ok "the restarted daemon re-adopted both sessions, and their clients rejoined it"
verdict strict "Operation not permitted"
verdict open "Connection refused"
wait_for 30 sh -c "! kill -0 $strict 2>/dev/null && ! kill -0 $open 2>/dev/null" || fail "the sluice run clients did not end"
cat /tmp/t/strict.out /tmp/t/open.out
wait_for 10 no_scope || fail "scopes left after the sessions ended: $(scopes)"
ok "the scopes are gone after the sessions"

echo "--- sluice cleanup"
systemctl stop sluice.service || fail "systemctl stop sluice failed"
sluice cleanup || fail "sluice cleanup failed"
[ ! -d "$slice" ] || fail "sluice cleanup left $slice"
[ ! -e /sys/fs/bpf/sluice ] || fail "sluice cleanup left /sys/fs/bpf/sluice"
ok "sluice cleanup stops sluice.slice and unpins the datapath"
finish 0
