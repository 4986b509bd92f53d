// SPDX-License-Identifier: Apache-2.0

package proxy

import "net/netip"

// NoProxy is the NO_PROXY value Env sets: loopback names and addresses
// are reached directly, since loopback is always allowed and a loopback
// service behind the proxy would only be slower.
const NoProxy = "localhost,127.0.0.1,::1"

// Env returns the environment that points a confined command at the proxy
// listening on addr: HTTP_PROXY and HTTPS_PROXY as http://ADDR (HTTPS goes
// through CONNECT), ALL_PROXY as socks5h://ADDR (the h: names are resolved
// by the proxy, under its rules, not by the client), and NO_PROXY, each in
// upper and lower case because tools disagree on which they read (curl
// reads only the lower-case http_proxy, for security reasons).
func Env(addr netip.AddrPort) []string {
	a := addr.String() // brackets an IPv6 address
	vars := []struct{ name, value string }{
		{"HTTP_PROXY", "http://" + a},
		{"HTTPS_PROXY", "http://" + a},
		{"ALL_PROXY", "socks5h://" + a},
		{"NO_PROXY", NoProxy},
		{"http_proxy", "http://" + a},
		{"https_proxy", "http://" + a},
		{"all_proxy", "socks5h://" + a},
		{"no_proxy", NoProxy},
	}
	env := make([]string, len(vars))
	for i, v := range vars {
		env[i] = v.name + "=" + v.value
	}
	return env
}
