#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# inside-kubernetes.sh runs as a oneshot unit in a container whose PID 1 is systemd, on a pure cgroup v2
# tree (kubernetes_linux_test.go boots it with systemd-nspawn, with containerd, crictl, ctr, runc and
# the test image added). It plays a Kubernetes node whose kubelet uses the systemd cgroup driver:
# containerd's runc with SystemdCgroup = true, pods made with crictl as the kubelet makes them, their
# cgroup parent the slice kubepods-besteffort-pod<uid>.slice. It checks that `sluice node` confines a
# pod of a guarded namespace (its containers land in kubepods.slice/kubepods-besteffort.slice/
# kubepods-besteffort-pod<uid>.slice, which the agent must find from the slice's name) while the
# unconfined twin in an unguarded namespace is not, through a kill -9 and a restart of the agent.
# The "world" is two addresses on the machine's loopback link, 203.0.113.7 (allowed) and
# 203.0.113.8 (denied), with a server that records every connection it accepts in /tmp/t/world.log;
# the pods share the machine's network (host network), so the server's record is the judge. The
# verdict goes to /sluice-test.log, whose last line is "EXIT 0" when every check held. Every wait is
# bounded; the container powers off at the end whatever happened.
exec >/sluice-test.log 2>&1
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin
# IMAGE, the test image's name, written by the Go test.
. /k8s.env
finish() {
	echo "EXIT $1"
	systemctl --no-block start poweroff.target
	exit "$1"
}
fail() {
	echo "FAIL: $*"
	journalctl --no-pager -n 40 -u sluice-node.service
	journalctl --no-pager -n 30 -u sluice-containerd.service
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
mkdir -p /tmp/t /k8s
hits() { grep -c " $1\$" /tmp/t/world.log 2>/dev/null || true; }
# synced N: agents logged their synchronization with containerd's NRI at least N times.
synced() { [ "$(journalctl --no-pager -u sluice-node.service | grep -c 'nri: synchronized with')" -ge "$1" ]; }
last_sync() { journalctl --no-pager -u sluice-node.service | grep -o 'nri: synchronized with.*' | tail -n 1; }

echo "--- the cgroup tree"
fs=$(stat -fc %T /sys/fs/cgroup)
echo "/sys/fs/cgroup is $fs"
[ "$fs" = cgroup2fs ] || fail "/sys/fs/cgroup is $fs, want cgroup2fs (a pure cgroup v2 tree)"
ok "a pure cgroup v2 tree"

echo "--- the world"
ip link set lo up && ip addr add 203.0.113.7/32 dev lo && ip addr add 203.0.113.8/32 dev lo || fail "could not give lo the world's addresses"
# The greeting is what the probe reads after its connect.
systemd-run --quiet --unit=sluice-world perl -MIO::Socket::INET -e '
	$| = 1;
	my $l = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => 80, Listen => 16, ReuseAddr => 1) or die "listen: $!";
	open(my $log, ">>", "/tmp/t/world.log") or die; $log->autoflush(1);
	while (my $c = $l->accept) { print $log "hit " . $c->sockhost . "\n"; print $c "hello\n"; close $c }' || fail "the world server did not start"
wait_for 10 bash -c "(exec 3<>/dev/tcp/203.0.113.7/80)" || fail "the world server does not answer"
[ "$(hits 203.0.113.7)" -ge 1 ] || fail "the world server records nothing"
ok "the world server records connections to 203.0.113.7 and .8"

echo "--- containerd with runc's systemd cgroup driver"
mkdir -p /etc/containerd /etc/cni/net.d /opt/cni/bin
# criworld's configuration (version 3), with the paths of a machine's own containerd and
# SystemdCgroup = true, as on a node whose kubelet has cgroupDriver: systemd. No pod network:
# host-network pods only, which need no CNI. The native snapshotter: the root is a plain
# directory of the host's.
# On a host with hybrid cgroups, nspawn's pure v2 tree has no controllers (the host's are all
# bound to v1): runc would fail each pod writing the CPU shares containerd gives its sandbox, so
# there the runtime is runc with the limits taken out of the spec (runcnolimits). The cgroups,
# and so what this test is about, are systemd's all the same.
runtime=/usr/local/bin/runc
controllers=$(cat /sys/fs/cgroup/cgroup.controllers)
echo "the cgroup v2 tree's controllers: ${controllers:-none}"
case " $controllers " in *" cpu "*) ;; *) runtime=/usr/local/bin/runcnolimits ;; esac
echo "the OCI runtime: $runtime"
cat >/etc/containerd/config.toml <<TOML
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "native"

    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "$IMAGE"

  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    disable_apparmor = true
    # A containerd in a test must not raise its pods' OOM scores above its own.
    restrict_oom_score_adj = true
    enable_cdi = false

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "$runtime"
          SystemdCgroup = true

    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["/opt/cni/bin"]
      conf_dir = "/etc/cni/net.d"

  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins."io.containerd.nri.v1.nri"]
    disable = false
    socket_path = "/run/nri/nri.sock"
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "5s"
TOML
# containerd copies these into host-network pods; the bare root file system has neither. The
# name server is loopback's: nothing in the test resolves names.
[ -e /etc/hosts ] || echo "127.0.0.1 localhost" >/etc/hosts
[ -e /etc/resolv.conf ] || echo "nameserver 127.0.0.1" >/etc/resolv.conf
cat >/etc/crictl.yaml <<'YAML'
runtime-endpoint: unix:///run/containerd/containerd.sock
image-endpoint: unix:///run/containerd/containerd.sock
timeout: 30
YAML
# As containerd.service runs it: its shims outlive it, and runc makes each container's scope.
systemd-run --quiet --unit=sluice-containerd -p Delegate=yes -p KillMode=process containerd --config /etc/containerd/config.toml ||
	fail "containerd did not start"
wait_for 60 crictl info || fail "containerd's CRI does not answer"
# --local: the transfer service would unpack for its default snapshotter only.
ctr -n k8s.io images import --local --snapshotter native /image.tar >/tmp/t/import 2>&1 || fail "ctr images import of the test image failed: $(cat /tmp/t/import)"
crictl info | grep -q '"SystemdCgroup": true' || fail "containerd's CRI does not report runc's systemd cgroup driver: $(crictl info | grep -i systemd)"
ok "containerd runs, runc with the systemd cgroup driver"

echo "--- sluice node"
mkdir -p /etc/sluice/node /var/lib/sluice/node
echo '{"allowed_hosts": ["203.0.113.7"]}' >/etc/sluice/node/agents.json
echo '{"namespaces": {"agents": {"default": "agents"}}}' >/etc/sluice/node/namespaces.json
echo '{"allowed_hosts": ["203.0.113.7"]}' >/etc/sluice/network_allowlist.json
start_agent() {
	systemctl reset-failed sluice-node.service 2>/dev/null
	systemd-run --quiet --unit=sluice-node sluice node --nri-socket /run/nri/nri.sock --policies /etc/sluice/node \
		--allowlist /etc/sluice/network_allowlist.json --hook-dir "" --guard-file /var/lib/sluice/node/namespaces.json
}
start_agent || fail "systemd-run sluice node failed"
wait_for 30 synced 1 || fail "the agent did not synchronize with containerd's NRI"
ok "the agent runs: $(last_sync)"

# runpod NAME NAMESPACE: a BestEffort pod on the host network, as a kubelet with the systemd driver
# asks for it (the uid's dashes become underscores in the slice's name, as the kubelet escapes them),
# and a container running /pause in it. Sets POD, CTR, UID_, SLICE.
n=0
runpod() {
	n=$((n + 1))
	UID_=$(cat /proc/sys/kernel/random/uuid)
	SLICE="kubepods-besteffort-pod${UID_//-/_}.slice"
	cat >/k8s/pod-$n.json <<JSON
{"metadata": {"name": "$1", "namespace": "$2", "uid": "$UID_", "attempt": 0},
 "log_directory": "/var/log/pods/$UID_",
 "linux": {"cgroup_parent": "$SLICE", "security_context": {"namespace_options": {"network": 2}}}}
JSON
	cat >/k8s/ctr-$n.json <<JSON
{"metadata": {"name": "main", "attempt": 0}, "image": {"image": "$IMAGE"}, "command": ["/pause"],
 "log_path": "main.log", "linux": {"security_context": {"namespace_options": {"network": 2}}}}
JSON
	POD=$(crictl runp /k8s/pod-$n.json) || fail "crictl runp $2/$1 failed"
	CTR=$(crictl create "$POD" /k8s/ctr-$n.json /k8s/pod-$n.json) || fail "crictl create in $2/$1 failed"
	crictl start "$CTR" >/dev/null || fail "crictl start in $2/$1 failed"
}
# probe CTR ADDR: the probe's JSON line for a connect to ADDR:80 from an exec in CTR.
probe() {
	# Its own exec id each time: it runs in a subshell, where a counter would not count.
	timeout 30 ctr -n k8s.io tasks exec --exec-id "probe-$(date +%s%N)" "$1" /probe tcp "$2" 80 2>&1 | tail -n 1
}
confined() { # CTR WHEN
	local before out
	before=$(hits 203.0.113.8)
	out=$(probe "$1" 203.0.113.8)
	case "$out" in *'"errno":"EPERM"'*) ;; *) fail "$2: the pod -> 203.0.113.8: want EPERM, got: $out" ;; esac
	sleep 0.3
	[ "$(hits 203.0.113.8)" -eq "$before" ] || fail "$2: the world recorded a connection to 203.0.113.8"
	ok "$2: refused 203.0.113.8 (EPERM), and the world recorded nothing"
}
allowed() { # CTR WHEN
	local before out
	before=$(hits 203.0.113.7)
	out=$(probe "$1" 203.0.113.7)
	case "$out" in *'"ok":true'*) ;; *) fail "$2: the pod -> 203.0.113.7 (allowed): $out" ;; esac
	wait_for 5 sh -c "[ \$(grep -c ' 203.0.113.7\$' /tmp/t/world.log) -gt $before ]" || fail "$2: the world recorded nothing from the allowed connect"
	ok "$2: reached 203.0.113.7, and the world recorded it"
}

echo "--- the unconfined twin: a pod of namespace web"
runpod twin web
twin=$CTR
before=$(hits 203.0.113.8)
out=$(probe "$twin" 203.0.113.8)
case "$out" in *'"ok":true'*) ;; *) fail "the unguarded pod cannot reach 203.0.113.8: $out" ;; esac
wait_for 5 sh -c "[ \$(grep -c ' 203.0.113.8\$' /tmp/t/world.log) -gt $before ]" || fail "the world recorded nothing from the unguarded pod"
ok "a pod of namespace web reaches 203.0.113.8, and the world records it"

echo "--- a pod of the guarded namespace agents"
runpod agent agents
agent=$CTR agent_slice=$SLICE
pid=$(crictl inspect -o go-template --template '{{.info.pid}}' "$agent") || fail "crictl inspect $agent failed"
cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
echo "the agents pod's container (pid $pid) is in $cg"
want="/kubepods.slice/kubepods-besteffort.slice/$agent_slice/"
case "$cg" in "$want"*) ;; *) fail "the container's cgroup $cg is not below $want: not the systemd driver's layout" ;; esac
[ "$(systemctl show -p ActiveState --value "$agent_slice")" = active ] || fail "systemd has no active $agent_slice"
ok "its cgroup is below $want (the systemd driver's slice)"
# The agent names a pod's session after its pod cgroup, the one it made out of the slice's name.
grep '"type":"session_started"' /var/log/sluice/audit.jsonl | grep -q "\"session\":\"$agent_slice\"" ||
	fail "no session_started for session $agent_slice in the audit log"
ok "the agent confined it as session $agent_slice"
confined "$agent" "attached"
allowed "$agent" "attached"

echo "--- kill -9 of the agent"
systemctl kill -s KILL sluice-node.service
wait_for 10 sh -c "! systemctl is-active -q sluice-node.service" || fail "the agent did not die"
confined "$agent" "no agent"
start_agent || fail "systemd-run sluice node after the kill failed"
wait_for 30 synced 2 || fail "the new agent did not synchronize with containerd's NRI"
ok "a new agent runs: $(last_sync)"
confined "$agent" "a new agent"
allowed "$agent" "a new agent"

echo "--- a new pod of namespace agents, under the new agent"
runpod agent2 agents
confined "$CTR" "a new pod"
allowed "$CTR" "a new pod"

echo "--- clean up"
for p in $(crictl pods -q); do
	crictl stopp "$p" >/dev/null && crictl rmp "$p" >/dev/null || fail "could not remove pod $p"
done
ok "the pods are gone"
finish 0
