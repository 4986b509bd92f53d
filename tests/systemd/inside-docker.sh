#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# inside-docker.sh runs as a oneshot unit in a container whose PID 1 is systemd (systemd_linux_test.go
# boots it with systemd-nspawn, with the host's Docker engine binaries and the minbase image tarball
# added). It runs dockerd with the systemd cgroup driver and checks that a container started with
# --cgroup-parent=sluice.slice (sluice.slice/docker-<id>.scope) is confined, through a kill -9 of the
# daemon and a `docker restart`, that a labelled container with a mistyped parent is refused, and that
# a `docker build` in a `sluice run --docker` session runs its steps under the session's policy (Docker's
# systemd driver takes the build's alias slice as their parent).
# The "world" is two addresses on the machine's loopback link, 203.0.113.7 (allowed) and
# 203.0.113.8 (denied; the datapath judges them by address, not by link), with a server that records every connection it accepts in /tmp/t/world.log; containers
# share the machine's network (--network host), so the server's record is the judge. Its verdict
# goes to /sluice-test.log, whose last line is "EXIT 0" when every check held. Every wait is
# bounded; the container powers off at the end whatever happened.
exec >/sluice-test.log 2>&1
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
finish() {
	echo "EXIT $1"
	systemctl --no-block start poweroff.target
	exit "$1"
}
fail() {
	echo "FAIL: $*"
	journalctl --no-pager -n 60 -u sluice.service -u sluice-docker.service
	tail -n 20 /var/log/sluice/audit.jsonl 2>/dev/null
	finish 1
}
ok() { echo "ok: $*"; }
wait_for() {
	local n=$(($1 * 10))
	shift
	until "$@" >/dev/null 2>&1; do
		n=$((n - 1))
		[ "$n" -gt 0 ] || return 1
		sleep 0.1
	done
}
mkdir -p /tmp/t
audit=/var/log/sluice/audit.jsonl
slice=/sys/fs/cgroup/sluice.slice
count() { grep -c "\"type\":\"$1\"" "$audit" 2>/dev/null || echo 0; }
hits() { grep -c " $1\$" /tmp/t/world.log 2>/dev/null || true; }
# try CONTAINER ADDR: a connect to ADDR:80 from a docker exec in CONTAINER; prints the error or "connected".
try() {
	docker exec "$1" bash -c "(exec 3<>/dev/tcp/$2/80 && echo connected) 2>&1" 2>&1 | tail -n 1
}

echo "--- the world"
ip link set lo up && ip addr add 203.0.113.7/32 dev lo && ip addr add 203.0.113.8/32 dev lo || fail "could not give lo the world's addresses"
systemd-run --quiet --unit=sluice-world perl -MIO::Socket::INET -e '
	$| = 1;
	my $l = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => 80, Listen => 16, ReuseAddr => 1) or die "listen: $!";
	open(my $log, ">>", "/tmp/t/world.log") or die; $log->autoflush(1);
	while (my $c = $l->accept) { print $log "hit " . $c->sockhost . "\n"; close $c }' || fail "the world server did not start"
wait_for 10 bash -c "(exec 3<>/dev/tcp/203.0.113.7/80)" || fail "the world server does not answer"
[ "$(hits 203.0.113.7)" -ge 1 ] || fail "the world server records nothing"
ok "the world server records connections to 203.0.113.7 and .8"

echo "--- dockerd with the systemd cgroup driver"
mkdir -p /etc/docker
cat >/etc/docker/daemon.json <<'JSON'
{"exec-opts": ["native.cgroupdriver=systemd"], "storage-driver": "vfs", "bridge": "none",
 "iptables": false, "ip6tables": false, "ip-forward": false, "ip-masq": false}
JSON
systemd-run --quiet --unit=sluice-docker -p Delegate=yes dockerd || fail "dockerd did not start"
wait_for 60 docker version || fail "dockerd does not answer"
driver=$(docker info --format '{{.CgroupDriver}} {{.CgroupVersion}}')
[ "$driver" = "systemd 2" ] || fail "docker info: cgroup driver and version '$driver', want 'systemd 2'"
ok "dockerd runs with the systemd cgroup driver on cgroup v2"
docker import /base.tar base >/dev/null || fail "docker import of the minbase image failed"

echo "--- sluice"
mkdir -p /etc/sluice
echo '{"allowed_hosts": ["203.0.113.7"]}' >/etc/sluice/network_allowlist.json
systemctl start sluice.service || fail "systemctl start sluice failed"
wait_for 20 test -S /run/sluice/sluice.sock || fail "the daemon's socket did not appear"
sluice check 2>&1 | grep -E "^(ok|warn|FAIL) +containers" | tee /tmp/t/check
grep -q -- "--cgroup-parent=sluice.slice" /tmp/t/check || fail "sluice check does not print --cgroup-parent=sluice.slice"
grep -q "driver: systemd" /tmp/t/check || fail "sluice check does not see Docker's systemd driver"
ok "sluice check prints the flag for this host"

echo "--- the unconfined twin"
before=$(hits 203.0.113.8)
out=$(docker run --rm --network host base bash -c '(exec 3<>/dev/tcp/203.0.113.8/80 && echo connected) 2>&1')
[ "$out" = connected ] || fail "an unconfined container cannot reach 203.0.113.8: $out"
[ "$(hits 203.0.113.8)" -gt "$before" ] || fail "the world recorded nothing from the unconfined container"
ok "an unconfined container reaches 203.0.113.8, and the world records it"

echo "--- a container in sluice.slice"
id=$(docker run -d --name agent --network host --cgroup-parent=sluice.slice base sleep 600) || fail "docker run --cgroup-parent=sluice.slice failed"
scope="docker-$id.scope"
wait_for 20 test -d "$slice/$scope" || fail "no $scope in sluice.slice: $(ls "$slice")"
ok "the container is $slice/$scope"
wait_for 20 sh -c "[ \$(grep -c '\"type\":\"session_started\"' $audit 2>/dev/null) -ge 1 ]" || fail "no session_started for the container"
grep '"type":"session_started"' "$audit" | grep -q "\"session\":\"$scope\"" || fail "session_started does not name $scope"
ok "the daemon attached it as session $scope"
confined() { # WHEN
	local before out
	before=$(hits 203.0.113.8)
	out=$(try agent 203.0.113.8)
	case "$out" in *"Operation not permitted"*) ;; *) fail "$1: the container -> 203.0.113.8: want 'Operation not permitted', got: $out" ;; esac
	sleep 0.3
	[ "$(hits 203.0.113.8)" -eq "$before" ] || fail "$1: the world recorded a connection to 203.0.113.8"
	ok "$1: refused 203.0.113.8 (EPERM), and the world recorded nothing"
}
allowed() { # WHEN
	local before out
	before=$(hits 203.0.113.7)
	out=$(try agent 203.0.113.7)
	[ "$out" = connected ] || fail "$1: the container -> 203.0.113.7 (allowed): $out"
	wait_for 5 sh -c "[ \$(grep -c ' 203.0.113.7\$' /tmp/t/world.log) -gt $before ]" || fail "$1: the world recorded nothing from the allowed connect"
	ok "$1: reached 203.0.113.7, and the world recorded it"
}
confined "attached"
allowed "attached"

echo "--- kill -9 of the daemon"
systemctl kill -s KILL sluice.service
wait_for 10 sh -c "! systemctl is-active -q sluice.service" || fail "the daemon did not die"
confined "no daemon"
systemctl start sluice.service || fail "systemctl start sluice after the kill failed"
wait_for 20 sh -c "[ \$(grep -c '\"type\":\"session_started\"' $audit) -ge 2 ]" || fail "the new daemon did not attach the container again"
confined "a new daemon"
allowed "a new daemon"

echo "--- docker restart"
n=$(count session_started)
docker restart -t 1 agent >/dev/null || fail "docker restart failed"
wait_for 20 test -d "$slice/$scope" || fail "no $scope after docker restart"
wait_for 20 sh -c "[ \$(grep -c '\"type\":\"session_started\"' $audit) -gt $n ]" || fail "no new session after docker restart"
confined "after docker restart"
allowed "after docker restart"

echo "--- a labelled container with a mistyped parent"
bad=$(docker run -d --name bad --network host --cgroup-parent=sluce.slice --label sluice.policy=dev base sleep 600) || fail "docker run --cgroup-parent=sluce.slice failed"
wait_for 20 sh -c "grep -q 1 /sys/fs/cgroup/sluce.slice/docker-$bad.scope/cgroup.freeze" || fail "the misplaced labelled container was not frozen"
grep '"type":"session_refused"' "$audit" | grep -q "${bad:0:12}" || fail "no session_refused line names the misplaced container"
journalctl --no-pager -u sluice.service | grep -q "container ${bad:0:12} refused" || fail "the daemon's log does not name the misplaced container"
ok "a labelled container in sluce.slice is frozen and reported"
sluice check 2>&1 | grep "misplaced containers" | grep -q "${bad:0:12}" || fail "sluice check does not name the misplaced container"
ok "sluice check names it"
docker rm -f bad >/dev/null

echo "--- docker rm"
docker rm -f agent >/dev/null || fail "docker rm failed"
wait_for 20 sh -c "[ \$(grep -c '\"type\":\"session_ended\"' $audit) -ge 2 ]" || fail "no session_ended after docker rm"
wait_for 10 sh -c "! test -d $slice/$scope" || fail "$scope left after docker rm"
ok "the session ended and the scope is gone"
echo "--- docker build in a sluice run --docker session (the embedded enforcer: the daemon stopped)"
systemctl stop sluice.service || fail "systemctl stop sluice failed"
# Not below /tmp: the session gets a /tmp of its own.
mkdir -p /srv/build && chmod 777 /srv/build && cd /srv/build || fail "no build directory"
# The step writes what each connect got; --network none: an address the
# datapath lets through finds no route (ENETUNREACH), a refused one EPERM.
cat >Dockerfile <<'DOCKERFILE'
FROM base
RUN bash -c 'for a in 203.0.113.7 203.0.113.8; do (exec 3<>/dev/tcp/$a/80 && echo connected) > /$a 2>&1; done; true'
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q --network none -t twin . >/tmp/t/twin.out 2>&1 || fail "the unconfined build failed: $(cat /tmp/t/twin.out)"
twin=$(docker run --rm twin cat /203.0.113.8)
case "$twin" in *"Network is unreachable"*) ;; *) fail "the unconfined build's step -> 203.0.113.8: '$twin', want ENETUNREACH" ;; esac
ok "the unconfined twin's step is not refused (no route: ENETUNREACH)"
# --no-cache: the twin's step would otherwise be reused, and never run in the session.
sluice run --user 65534:65534 --docker --allow 203.0.113.7 -- sh -c 'export HOME=/srv/build DOCKER_BUILDKIT=0; docker build --no-cache --network none -t built . >build.out 2>&1' \
	>/tmp/t/run.out 2>&1 || fail "sluice run --docker: the build failed: $(cat /tmp/t/run.out build.out)"
allowed_out=$(docker run --rm built cat /203.0.113.7)
denied_out=$(docker run --rm built cat /203.0.113.8)
case "$allowed_out" in *"Network is unreachable"*) ;; *) fail "the session's build step -> 203.0.113.7 (allowed): '$allowed_out', want it through the datapath (ENETUNREACH)" ;; esac
case "$denied_out" in *"Operation not permitted"*) ;; *) fail "the session's build step -> 203.0.113.8: '$denied_out', want EPERM" ;; esac
grep -q "denied .*203.0.113.8:80" /tmp/t/run.out || fail "the session's terminal has no line for the step's denial: $(cat /tmp/t/run.out)"
ok "a build step under the session's slice is judged by the session's policy"
left=$(ls "$slice" | grep -c alias)
[ "$left" -eq 0 ] || fail "the build's slice is left in $slice: $(ls "$slice")"
ok "the build's slice is gone with the build"
systemctl stop sluice-docker.service
finish 0
