// SPDX-License-Identifier: Apache-2.0

// Package criworld runs a Kubernetes node's container runtime on one
// machine, for tests: a containerd 2.x built from its module (its CRI
// plugin and NRI), Debian's runc, and crictl from cri-tools, driven the way
// a kubelet drives them. Pods are made with crictl under the kubelet's
// cgroupfs layout (/kubepods/besteffort/pod<uid>), with the host network of
// the namespace containerd runs in or, on a node with a pod network
// (NodeOptions.PodCIDR), with their own network namespace wired by CNI
// plugins, from a local image holding a pause program and the tests' probe
// (no registry is reachable).
//
// Decisions:
//   - The tools are built once into a cache (/var/cache/sluice-test/
//     cri-bin) at pinned versions: a cold build takes minutes, a warm one
//     nothing. runc comes from the distribution (docker.io pulls it in).
//   - Each node has its own directory (root, state, sockets, config), so a
//     node never touches a containerd the machine runs, and its cleanup
//     removes pods, shims, mounts and the pod cgroups it made, also when a
//     test fails.
//   - A pod network is ptp with host-local addresses, no NAT: each pod's
//     veth ends in containerd's namespace (a test's, never the machine's),
//     which routes for the pods (world.RouteToClient), so the world's
//     servers see each pod's own address. The plugins are built like the
//     tools, into a cache directory of their own; pods' namespaces are
//     pinned below the node's state directory, and the pods' CNI DEL runs
//     at cleanup before containerd stops.
//   - Exec goes through `ctr tasks exec` rather than `crictl exec`: no
//     streaming server, and the exec'd process joins the container's
//     cgroup as a kubelet's exec does.
package criworld
