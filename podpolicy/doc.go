// SPDX-License-Identifier: Apache-2.0

// Package podpolicy decides which allowlist a Kubernetes pod gets on a
// node that `sluice node` guards, from what the cluster's admin wrote in
// one ConfigMap: named policies (each a network_allowlist.json) and the
// guard, which namespaces are confined and which policies their pods may
// choose with the annotation sluice.dev/policy.
//
// It is platform-free and knows nothing of containerd or the datapath: the
// node agent hands it what NRI says of a pod (namespace, name, uid,
// annotations, labels) and gets a Choice back. Keeping the decision here
// lets every rule (a pod can only narrow, an annotation counts only where
// the admin allows it, a guarded pod with no policy is refused) be tested
// without root, a kernel or a container engine.
//
// The admin's files are the only authority. Nothing a pod says widens what
// it gets: its annotation picks one of the names the admin listed for its
// namespace, and whatever it picks is intersected with the node's own
// allowlist by the caller (sessions.Intersect), as every session is.
package podpolicy
