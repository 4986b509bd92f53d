// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// MarshalJSON writes the policy in the file format that Parse reads, compact.
// Each request for an entry becomes one element: a plain string when it has
// neither owner nor allow_private, otherwise an object; an entry requested by
// several owners therefore appears once per owner, next to each other, and
// Parse merges them back. Parse(MarshalJSON) gives back the same policy.
func (p *Policy) MarshalJSON() ([]byte, error) {
	return p.encode(false), nil
}

// Format returns the policy as file text for writing back a
// network_allowlist.json: one element per line, so that a change to the
// policy is a change to as many lines in a diff.
func (p *Policy) Format() []byte {
	return p.encode(true)
}

func (p *Policy) encode(pretty bool) []byte {
	var b bytes.Buffer
	sep, open, closeList, closeObj, comma, colon := ",", `{"allowed_hosts":[`, "]", "}", ",", ":"
	hiddenKey := `,"hidden_paths":[`
	if pretty {
		sep, open, closeList, closeObj, comma, colon = ",\n    ", "{\n  \"allowed_hosts\": [\n    ", "\n  ]", "\n}\n", ", ", ": "
		if p.Len() == 0 {
			open, closeList = "{\n  \"allowed_hosts\": [", "]"
		}
		hiddenKey = ",\n  \"hidden_paths\": ["
	}
	b.WriteString(open)
	first := true
	for _, it := range p.itemsOrNil() {
		for _, g := range it.grants {
			if !first {
				b.WriteString(sep)
			}
			first = false
			encodeGrant(&b, it.t, g, comma, colon)
		}
	}
	b.WriteString(closeList)
	if p != nil && !p.local.IsDefault() {
		encodeLocal(&b, p.local, pretty)
	}
	if p != nil && len(p.hidden) > 0 {
		b.WriteString(hiddenKey)
		for i, h := range p.hidden {
			if i > 0 {
				b.WriteString(comma)
			}
			writeString(&b, h)
		}
		b.WriteString("]")
	}
	if p.Docker() {
		if pretty {
			b.WriteString(",\n  \"docker\": true")
		} else {
			b.WriteString(`,"docker":true`)
		}
	}
	b.WriteString(closeObj)
	return b.Bytes()
}

func (p *Policy) itemsOrNil() []item {
	if p == nil {
		return nil
	}
	return p.items
}

// encodeGrant writes one element; comma and colon carry the spacing.
func encodeGrant(b *bytes.Buffer, t target, g grant, comma, colon string) {
	if g.owner == "" && !g.private && g.ports == nil && g.verify == VerifyDefault {
		writeString(b, t.String())
		return
	}
	b.WriteString(`{"host"` + colon)
	writeString(b, t.String())
	if g.owner != "" {
		b.WriteString(comma + `"owner"` + colon)
		writeString(b, g.owner)
	}
	if g.private {
		b.WriteString(comma + `"allow_private"` + colon + "true")
	}
	if g.ports != nil {
		b.WriteString(comma + `"ports"` + colon + "[")
		for i, el := range g.ports.Elements() {
			if i > 0 {
				b.WriteString(comma)
			}
			if n, err := strconv.Atoi(el); err == nil {
				b.WriteString(strconv.Itoa(n))
			} else {
				writeString(b, el)
			}
		}
		b.WriteString("]")
	}
	if g.verify != VerifyDefault {
		b.WriteString(comma + `"verify"` + colon)
		writeString(b, string(g.verify))
	}
	b.WriteString("}")
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// encodeLocal writes the non-default Local keys after allowed_hosts.
func encodeLocal(b *bytes.Buffer, l Local, pretty bool) {
	sep, colon := ",", ":"
	if pretty {
		sep, colon = ",\n  ", ": "
	}
	if len(l.UnixSockets) > 0 {
		b.WriteString(sep + `"unix_sockets"` + colon + "[")
		for i, u := range l.UnixSockets {
			if i > 0 {
				b.WriteString(map[bool]string{true: ", ", false: ","}[pretty])
			}
			writeString(b, u)
		}
		b.WriteString("]")
	}
	if l.Loopback.Strict() {
		b.WriteString(sep + `"loopback"` + colon)
		writeString(b, string(l.Loopback))
	}
	if len(l.LoopbackPorts) > 0 {
		q, _ := json.Marshal(l.LoopbackPorts) // []uint16: a list of numbers
		b.WriteString(sep + `"loopback_ports"` + colon)
		b.Write(q)
	}
}
