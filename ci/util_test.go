// SPDX-License-Identifier: Apache-2.0

package ci_test

import (
	"net/netip"
	"strconv"
	"strings"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.TrimSpace(s))
	return n
}

func atoiString(n int) string { return strconv.Itoa(n) }
