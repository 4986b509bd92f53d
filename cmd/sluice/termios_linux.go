// SPDX-License-Identifier: Apache-2.0

package main

import "golang.org/x/sys/unix"

const ioctlGetTermios = unix.TCGETS
