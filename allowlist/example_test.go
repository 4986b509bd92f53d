// SPDX-License-Identifier: Apache-2.0

package allowlist_test

import (
	"fmt"
	"net/netip"

	"github.com/sluice-dev/sluice/allowlist"
)

func ExampleParse() {
	p, err := allowlist.Parse([]byte(`{"allowed_hosts": [
		"api.example.com",
		"*.example.org",
		{"host": "db.example.net", "owner": "provider:example", "allow_private": true},
		"203.0.113.7/24"
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range []string{"API.Example.com.", "www.example.org", "example.org", "db.example.net"} {
		if e, ok := p.MatchName(q); ok {
			fmt.Printf("%s: allowed by %s, private=%v\n", q, e, e.AllowPrivate)
		} else {
			fmt.Printf("%s: not allowed\n", q)
		}
	}
	fmt.Println(p.AllowsAddr(netip.MustParseAddr("203.0.113.200")))
	// Output:
	// API.Example.com.: allowed by api.example.com, private=false
	// www.example.org: allowed by *.example.org, private=false
	// example.org: not allowed
	// db.example.net: allowed by db.example.net, private=true
	// true
}

func ExampleParse_errors() {
	_, err := allowlist.Parse([]byte(`{"allowed_hosts": [
  "https://api.example.com/v1",
  "api.example.com:443"
]}`))
	fmt.Println(err)
	// Output:
	// 2 problems:
	// 	allowed_hosts[0] (line 2, column 3) "https://api.example.com/v1": give the host name "api.example.com", not a URL: the allowlist works on hosts and addresses, not on URLs
	// 	allowed_hosts[1] (line 3, column 3) "api.example.com:443": a port is not part of the host: give "api.example.com", and for one port only the object {"host": "api.example.com", "ports": [PORT]} in network_allowlist.json
}

func ExamplePolicy_Without() {
	p, _ := allowlist.Parse([]byte(`{"allowed_hosts": [
		{"host": "api.example.com", "owner": "provider:example"},
		{"host": "shared.example.com", "owner": "provider:example"},
		"shared.example.com"
	]}`))
	q, kept := p.Without("provider:example")
	fmt.Print(string(q.Format()))
	fmt.Println("kept:", kept[0])
	// Output:
	// {
	//   "allowed_hosts": [
	//     "shared.example.com"
	//   ]
	// }
	// kept: shared.example.com
}
