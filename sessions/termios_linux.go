// SPDX-License-Identifier: Apache-2.0

package sessions

import "golang.org/x/sys/unix"

// ioctlGetTermios reads a terminal's settings: isTerminal's probe.
const ioctlGetTermios = unix.TCGETS
