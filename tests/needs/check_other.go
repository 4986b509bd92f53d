// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package needs

import "runtime"

func check(n Need) []Missing {
	if n == Root {
		return []Missing{{"not Linux (" + runtime.GOOS + ")", "run the kernel suites on Linux 6.1 or later"}}
	}
	return nil
}
