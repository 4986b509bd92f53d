// SPDX-License-Identifier: Apache-2.0

// Package nriplugin is `sluice node`'s NRI plugin: how the node agent
// learns of pods from containerd (or CRI-O) through the Node Resource
// Interface, the runtime's own extension point, rather than by watching
// cgroups or the Kubernetes API. NRI tells a plugin of each pod sandbox as
// it starts, with its namespace, annotations, labels and cgroup parent,
// and asks it before each container is created: an error there makes the
// runtime refuse the container, so a guarded pod that cannot be confined
// never runs a container of its own.
//
// The plugin only translates: what a pod gets and the attaching are the
// daemon's (daemon.Server.ConfinePod), behind the Pods interface.
package nriplugin
