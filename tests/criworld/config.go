// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"fmt"
	"strconv"
	"strings"
)

// configTOML is containerd 2.x's configuration (version 3) for a node in
// dir: every path below dir, the CRI plugin with the test image as its
// sandbox image and runc with the kubelet's default cgroupfs driver, and
// NRI listening on nriSocket.
func configTOML(dir, socket, nriSocket, runc, snapshotter, baseSpec string, podAnnotations []string) string {
	q := strconv.Quote
	var anns []string
	for _, a := range podAnnotations {
		anns = append(anns, q(a))
	}
	return fmt.Sprintf(`version = 3
root = %[1]s
state = %[2]s
# The plugins this machine cannot run, so that their failures do not
# clutter the log.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]s

[ttrpc]
  address = %[4]s

[debug]
  level = "info"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = %[5]s

  [plugins."io.containerd.cri.v1.images"]
    snapshotter = %[6]s

    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = %[7]s

  [plugins."io.containerd.cri.v1.runtime"]
    enable_selinux = false
    disable_apparmor = true
    # A containerd in a test must not raise its pods' OOM scores above its
    # own (this machine refuses that).
    restrict_oom_score_adj = true
    enable_cdi = false
    # Pods' network namespaces are pinned below the node's state
    # directory, not in the machine's /var/run/netns, so that a node's
    # cleanup finds them and ip netns never lists them.
    netns_mounts_under_state_dir = true

    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        base_runtime_spec = %[8]s
        pod_annotations = [%[9]s]

        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = %[10]s
          Root = %[11]s
          SystemdCgroup = false

    [plugins."io.containerd.cri.v1.runtime".cni]
      # Version 3 reads bin_dirs only (bin_dir is migrated from version 2
      # configs alone), else it searches /opt/cni/bin.
      bin_dirs = [%[12]s]
      conf_dir = %[13]s

  [plugins."io.containerd.grpc.v1.cri"]
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"

  [plugins."io.containerd.nri.v1.nri"]
    disable = false
    socket_path = %[14]s
    plugin_path = %[15]s
    plugin_config_path = %[16]s
    plugin_registration_timeout = "5s"
    plugin_request_timeout = "5s"
`, q(dir+"/root"), q(dir+"/state"), q(socket), q(socket+".ttrpc"), q(dir+"/opt"), q(snapshotter), q(TestImage),
		q(baseSpec), strings.Join(anns, ", "), q(runc), q(dir+"/runc"), q(dir+"/cni/bin"), q(dir+"/cni/net.d"),
		q(nriSocket), q(dir+"/nri/plugins"), q(dir+"/nri/conf.d"))
}
