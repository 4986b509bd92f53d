# SPDX-License-Identifier: Apache-2.0
# The sluice daemon as a container image. The entrypoint is `sluice daemon`; arguments after
# the image name are passed on as daemon flags.
#
#   docker build -t sluice --build-arg VERSION=$(git describe --always --dirty) .
#
# It builds on any Docker engine, with or without BuildKit (no `# syntax` line, no
# `RUN --mount`), and needs no registry beyond the one that holds its two base images, which are
# build arguments:
#   GO_IMAGE    a Debian-based image with the Go toolchain on PATH (default golang:1.26-bookworm)
#   BASE_IMAGE  the runtime image (default debian:bookworm-slim); the binary is static, so
#               any Linux image with /etc/passwd and /etc/group will do
# Offline, with local images and no module proxy: `go mod vendor` first (the vendor/ directory
# joins the context) and pass --build-arg GOFLAGS=-mod=vendor; nothing is then downloaded during
# the build. tests/docker/images.sh does exactly that with images made by debootstrap.
#
# Run it (tests/containere2e runs exactly this, with --network none and its own paths; no
# --privileged, which not every host allows):
#
#   docker run -d --name sluice --restart unless-stopped \
#     --cgroupns=host --pid=host --network=host \
#     --cap-add SYS_ADMIN --cap-add NET_ADMIN --cap-add SYS_PTRACE --cap-add DAC_READ_SEARCH \
#     -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
#     -v /sys/fs/bpf:/sys/fs/bpf \
#     -v /run/sluice:/run/sluice \
#     -v /etc/sluice:/etc/sluice \
#     -v /var/log/sluice:/var/log/sluice \
#     sluice --group 1001            # a NUMERIC gid: see "users and groups" below
#
# Why each option is there:
#   --cap-add ...        CAP_SYS_ADMIN (bpf(), BPF links, cgroupfs, clone3: Docker's default
#                        seccomp profile allows bpf() and clone3() only with it, and
#                        CLONE_INTO_CGROUP needs clone3), CAP_NET_ADMIN (cgroup sock_addr
#                        programs), CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (exe and the caller's
#                        /proc entries). CAP_SETUID/SETGID/SETPCAP and CAP_KILL are in Docker's
#                        default set. (Docker 20.10 does not know the names BPF and PERFMON;
#                        SYS_ADMIN covers them.) --privileged works too, but is not needed.
#   -v /sys/fs/cgroup    A writable cgroup tree: the daemon creates its sessions' cgroups there,
#                        and on a hybrid (cgroup v1 + v2) host it moves itself out of the
#                        container's v1 cgroups at start, so that its sessions, which inherit
#                        them, survive `docker restart` / `docker stop` of this container.
#   --cgroupns=host      sluice creates its cgroup at the top of the host's cgroup2 hierarchy.
#                        Sessions live there, outside the container's cgroup.
#   -v /sys/fs/bpf:...   REQUIRED. The pins must be on the host's bpffs. Otherwise the daemon
#                        mounts a private bpffs inside the container, and enforcement is tied to
#                        that mount instead of surviving the container.
#   --pid=host           Kernel events carry host pids. The daemon reads /proc/<pid>/exe with
#                        them, and reads an API client's cgroup and namespaces from
#                        /proc/<peer pid>. Without it, exe is missing, every client counts as
#                        confined (sessions are refused), and stopping the container (its pid 1
#                        exits) kills every session.
#   --network=host       Confined commands use the daemon's network namespace. Omit it to confine
#                        them to the container's network instead.
#   -v /run/sluice:...   The API socket (/run/sluice/sluice.sock) for clients on the host, and the
#                        session records that let a restarted container re-adopt running sessions.
#   -v /etc/sluice:...   sluice.json and network_allowlist.json, which sluice allow/deny/revoke
#                        rewrite. The mount hides the image's default sluice.json (a missing
#                        config file is fine). With no allowlist file the policy is empty:
#                        loopback only.
#   -v /var/log/sluice   The audit log (docs/audit.md).
#
# Limits of running in a container:
#   - The daemon spawns every confined command itself, inside THIS container's file system
#     (and network namespace). A `sluice run -- cmd` from the host sends the host's path, working
#     directory and environment, and they must make sense inside the container. The usual
#     pattern is to build the agent's image FROM this one and run `sluice run` in it. Host
#     clients can always use the socket for status, sessions, events, allow, deny and revoke.
#   - Users and groups: uids and gids come from SO_PEERCRED and are host ids, because there is
#     no user namespace. Names, however, are looked up in the container's /etc/passwd and
#     /etc/group. So pass --group and --admin-group as numeric gids, and `sluice run --user`
#     as UID:GID.
#   - `docker stop` sends SIGTERM, then SIGKILL after 10 s. Either is safe: enforcement is
#     pinned, and sessions stay confined and running until a new daemon adopts them (tested
#     with `docker restart` mid-session); a `sluice run` waiting on the socket reattaches.
#     `sluice cleanup` (docker run --rm <same options> --entrypoint sluice sluice cleanup)
#     removes everything.
#
# No clang is needed: the compiled BPF object (loader/sluice_bpfel.o) is committed.

ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${GO_IMAGE} AS build
WORKDIR /src
# -mod=vendor builds from the context's vendor/ directory and downloads nothing.
ARG GOFLAGS=
# Dependencies first, so that this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN case " $GOFLAGS " in *" -mod=vendor "*) ;; *) go mod download && go mod verify ;; esac
COPY . .
ARG VERSION=dev
# Static binary: os/user then reads /etc/passwd and /etc/group directly (no NSS), which is
# what a container has anyway.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/sluice ./cmd/sluice

FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="sluice" \
      org.opencontainers.image.description="Kernel-level egress enforcement for AI agents (daemon)" \
      org.opencontainers.image.source="https://github.com/sluice-dev/sluice"
COPY --from=build /out/sluice /usr/local/bin/sluice
COPY packaging/sluice.json /etc/sluice/sluice.json
# Only an example: the image enforces an empty policy (loopback only) until you provide
# /etc/sluice/network_allowlist.json.
COPY packaging/network_allowlist.json /usr/share/doc/sluice/network_allowlist.json.example
COPY docs/ /usr/share/doc/sluice/
ENTRYPOINT ["/usr/local/bin/sluice", "daemon"]
