#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# demo.sh — sluice in one minute, in a throwaway world.
#
# Usage: sudo ./scripts/demo.sh [path/to/sluice]      (sudo make demo)
#
# It builds a fake internet out of two network namespaces joined by a veth
# pair: a "client" whose only route leads into a "world" that hosts two web
# servers, 203.0.113.10 (allowed) and 203.0.113.20 (not allowed). A shell
# confined by `sluice run --allow 203.0.113.10` fetches from both: the first
# answers, the second is refused with EPERM and sluice says why. Then the
# world's own log shows that the refused connection never arrived.
#
# Only documentation addresses are used (198.51.100.0/24, 203.0.113.0/24),
# and only inside the namespaces created here: nothing is ever sent to a real
# address. Everything (namespaces, servers, the isolated sluice instance
# "sluice-demo") is removed on exit, also after an error or ^C.
#
# Needs: root, bash, Go (to build the tiny server in scripts/demoserver),
# iproute2 and util-linux (nsenter). No python3, nc or curl.
set -euo pipefail

readonly CLIENT=sluice-demo-client
readonly WORLD=sluice-demo-world
readonly ALLOWED=203.0.113.10
readonly DENIED=203.0.113.20
# An isolated instance: its own cgroup, pins and state, so the demo never
# touches a real installation of sluice and cleans up only what it made.
export SLUICE_INSTANCE=sluice-demo

if [[ -t 1 ]]; then
	bold=$'\e[1m' dim=$'\e[2m' green=$'\e[32m' red=$'\e[31m' reset=$'\e[0m'
else
	bold='' dim='' green='' red='' reset=''
fi
heading() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$reset"; }
note() { printf '%s%s%s\n' "$dim" "$*" "$reset"; }
die() {
	printf '%sdemo: %s%s\n' "$red" "$*" "$reset" >&2
	exit 1
}

if [[ $(id -u) -ne 0 ]]; then
	die "needs root (it creates network namespaces and loads sluice's BPF programs): sudo make demo"
fi
sluice=${1:-bin/sluice}
[[ -x $sluice ]] || die "no sluice binary at $sluice: run 'make build' first, or pass its path"
sluice=$(realpath "$sluice")
for tool in go ip nsenter setpriv timeout; do
	command -v "$tool" >/dev/null || die "'$tool' is missing (Go, iproute2, util-linux and coreutils are needed)"
done
# The demo server is built from this repository, wherever it is run from.
cd "$(dirname "$(realpath "$0")")/.."

tmp=$(mktemp -d /tmp/sluice-demo.XXXXXX)
server_pid=''
cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [[ -n $server_pid ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	# Whatever else still runs in the namespaces would keep them alive.
	local ns
	local -a pids
	for ns in "$CLIENT" "$WORLD"; do
		mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null)
		((${#pids[@]} == 0)) || kill "${pids[@]}" 2>/dev/null || true
	done
	ip netns del "$CLIENT" 2>/dev/null || true
	ip netns del "$WORLD" 2>/dev/null || true
	"$sluice" cleanup >/dev/null 2>&1 || echo "demo: 'SLUICE_INSTANCE=$SLUICE_INSTANCE $sluice cleanup' failed; run it by hand" >&2
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# innet NS CMD...: run CMD in a namespace without `ip netns exec`, which would
# remount /sys and hide the cgroup and BPF filesystems that sluice needs.
innet() {
	local ns=$1
	shift
	nsenter --net="/run/netns/$ns" "$@"
}

# fetch is the confined program: it fetches / from each host given with
# bash's own /dev/tcp (so the demo needs no curl) and prints one line per
# host: the status and body, or the error connect(2) returned.
read -r -d '' fetch <<'EOF' || true
for host in "$@"; do
	# Printed as one line, so sluice's own report cannot land inside it.
	if reply=$(
		exec 2>&1
		exec 3<>"/dev/tcp/$host/80" || exit 1
		printf 'GET / HTTP/1.0\r\nHost: %s\r\n\r\n' "$host" >&3
		IFS= read -r status <&3
		while IFS= read -r line <&3 && [[ -n ${line%$'\r'} ]]; do :; done
		IFS= read -r body <&3
		printf '%s, "%s"' "${status%$'\r'}" "$body"
	); then
		echo "GET http://$host/ -> $reply"
	else
		# bash words a failed connect(2) as "...: connect: <strerror>".
		err=${reply#*connect: }
		echo "GET http://$host/ -> connect failed: ${err%%$'\n'*}"
	fi
done
EOF

# Leftovers of a run that was killed before its cleanup could run.
ip netns del "$CLIENT" 2>/dev/null || true
ip netns del "$WORLD" 2>/dev/null || true
"$sluice" cleanup >/dev/null 2>&1 || true

heading "sluice demo: a throwaway world in two network namespaces"
cat <<EOF
  client 198.51.100.1 ──veth── 198.51.100.2 world
                                 ├─ $ALLOWED:80   web server, to be allowed
                                 └─ $DENIED:80   web server, not allowed
Only the namespaces made here take part: nothing is sent to a real address.
EOF

note "building the world's web server (scripts/demoserver)..."
go build -o "$tmp/demoserver" ./scripts/demoserver

ip netns add "$WORLD"
ip netns add "$CLIENT"
ip -n "$CLIENT" link add veth0 type veth peer name veth0 netns "$WORLD"
ip -n "$CLIENT" addr add 198.51.100.1/24 dev veth0
ip -n "$WORLD" addr add 198.51.100.2/24 dev veth0
ip -n "$WORLD" addr add "$ALLOWED/32" dev lo
ip -n "$WORLD" addr add "$DENIED/32" dev lo
for ns in "$CLIENT" "$WORLD"; do
	ip -n "$ns" link set lo up
	ip -n "$ns" link set veth0 up
done
# The client's only way out leads into the world.
ip -n "$CLIENT" route add default via 198.51.100.2

# nsenter itself, not the innet function: a backgrounded function is a
# subshell, and $! would name it rather than the server. nsenter execs the
# server, so $! is the server's pid.
nsenter --net="/run/netns/$WORLD" "$tmp/demoserver" -ready "$tmp/ready" "$ALLOWED:80" "$DENIED:80" >"$tmp/world.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
	[[ -s $tmp/ready ]] && break
	kill -0 "$server_pid" 2>/dev/null || die "the world's server did not start: $(cat "$tmp/world.log")"
	sleep 0.1
done
[[ -s $tmp/ready ]] || die "the world's server did not start within 10 s"

heading "1. Without sluice: the client reaches both hosts"
note "\$ fetch $ALLOWED $DENIED      (fetch: a bash script using /dev/tcp; as uid 65534, unconfined)"
(cd / && innet "$CLIENT" setpriv --reuid=65534 --regid=65534 --clear-groups \
	timeout 10 bash -c "$fetch" fetch "$ALLOWED" "$DENIED") 2>&1 | sed 's/^/  /'
seen_before=$(wc -l <"$tmp/world.log")

heading "2. With sluice: only the allowed host"
note "\$ sluice run --user 65534:65534 --allow $ALLOWED -- fetch $ALLOWED $DENIED"
note "expected: $ALLOWED answers; $DENIED fails at once with 'Operation not permitted', and sluice prints a line saying which process tried which destination and why"
set +e
(cd / && innet "$CLIENT" "$sluice" run --user 65534:65534 --allow "$ALLOWED" -- \
	timeout 10 bash -c "$fetch" fetch "$ALLOWED" "$DENIED") >"$tmp/confined.out" 2>&1
status=$?
set -e
sed 's/^/  /' "$tmp/confined.out"
note "(exit status $status: sluice's is the command's)"

heading "3. What the world recorded during step 2"
tail -n +"$((seen_before + 1))" "$tmp/world.log" | sed 's/^/  /'
note "expected: one connection, to $ALLOWED; none to $DENIED, so the refused connection never left the client"

# The demo doubles as a smoke test: say so loudly when sluice did not do
# what the headings promised.
confined_seen=$(tail -n +"$((seen_before + 1))" "$tmp/world.log")
problems=()
grep -q "hello from $ALLOWED:80" "$tmp/confined.out" || problems+=("the allowed host $ALLOWED did not answer")
grep -q "hello from $DENIED:80" "$tmp/confined.out" && problems+=("the denied host $DENIED answered")
grep -q "to $DENIED:80" <<<"$confined_seen" && problems+=("the world saw a connection to $DENIED")
grep -qi "denied" "$tmp/confined.out" || problems+=("sluice printed no denial")

heading "Result"
if ((${#problems[@]} > 0)); then
	for p in "${problems[@]}"; do printf '%sUNEXPECTED: %s%s\n' "$red" "$p" "$reset"; done
	exit 1
fi
printf '%sok%s: the confined shell reached %s and was refused %s, which never saw a packet.\n' "$green" "$reset" "$ALLOWED" "$DENIED"
echo "Next: sudo sluice learn -o network_allowlist.json -- <your agent>   (audit mode: writes the allowlist it needed; review it)"
echo "      sudo sluice run --allowlist network_allowlist.json -- <your agent>"
note "cleaning up: namespaces, servers and the sluice-demo instance are removed on exit."
