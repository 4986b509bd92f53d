// SPDX-License-Identifier: Apache-2.0

//go:build darwin || freebsd || netbsd || openbsd

package main

import "golang.org/x/sys/unix"

const ioctlGetTermios = unix.TIOCGETA
