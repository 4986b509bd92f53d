// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp

package wfp

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Names of WFP layers, condition fields and match types, as in the SDK
// without their FWPM_LAYER_, FWPM_CONDITION_ and FWP_MATCH_ prefixes.
const (
	layerConnectV4 = "ALE_AUTH_CONNECT_V4"
	layerConnectV6 = "ALE_AUTH_CONNECT_V6"
	layerAcceptV4  = "ALE_AUTH_RECV_ACCEPT_V4"
	layerAcceptV6  = "ALE_AUTH_RECV_ACCEPT_V6"

	fieldUserID     = "ALE_USER_ID"
	fieldFlags      = "FLAGS"
	fieldProtocol   = "IP_PROTOCOL"
	fieldRemotePort = "IP_REMOTE_PORT"

	matchEqual       = "equal"
	matchFlagsAllSet = "flags_all_set"

	actionPermit = "permit"
	actionBlock  = "block"
)

// Values the filters use.
const (
	flagIsLoopback = 0x1 // FWP_CONDITION_FLAG_IS_LOOPBACK
	protocolTCP    = 6
	// matchFilterAccess is FWP_ACTRL_MATCH_FILTER: ALE_USER_ID matches a
	// connection when the security descriptor grants this right to the
	// token of the process behind it.
	matchFilterAccess = 0x1
	// Filter weights are FWP_UINT8, 0 to 15; within sluice's sublayer the
	// higher one wins.
	maxWeight    = 15
	permitWeight = 10
	blockWeight  = 2
)

// Filter describes one WFP filter without any Windows type, so that the
// filter set can be built and tested on every OS. Install turns it into an
// FWPM_FILTER0.
type Filter struct {
	Name       string      // display name, shown by `netsh wfp show filters`
	Layer      string      // "ALE_AUTH_CONNECT_V4", "ALE_AUTH_CONNECT_V6", "ALE_AUTH_RECV_ACCEPT_V4" or "_V6"
	Action     string      // "permit" or "block"
	Weight     uint8       // 0 to 15, within sluice's sublayer
	Conditions []Condition // all must hold; conditions on the same field are alternatives (WFP's rule)
}

// Condition is one FWPM_FILTER_CONDITION0.
type Condition struct {
	Field string // "ALE_USER_ID", "FLAGS", "IP_PROTOCOL" or "IP_REMOTE_PORT"
	Match string // "equal", or "flags_all_set" for FLAGS
	Value uint32 // FLAGS, IP_PROTOCOL and IP_REMOTE_PORT
	SDDL  string // ALE_USER_ID: a security descriptor naming the user
}

// Policy is what the confined user's processes may reach.
type Policy struct {
	// UserSID is the dedicated local user the confined command runs as
	// (S-1-5-21-...-RID, RID 1000 or above). Never the invoking user: that
	// would confine sluice's own proxy.
	UserSID string
	// ProxyPort is the session proxy's TCP port on loopback. Required.
	ProxyPort uint16
	// LoopbackPorts are further loopback TCP ports the policy allows.
	// Ignored with AllLoopback.
	LoopbackPorts []uint16
	// AllLoopback allows every loopback port and protocol, as sluice's BPF
	// mode does, and with it other sessions' listeners.
	AllLoopback bool
}

// accountSID matches a local or domain account SID; see checkSID.
var accountSID = regexp.MustCompile(`^S-1-5-21-[0-9]+-[0-9]+-[0-9]+-([0-9]+)$`)

// checkSID refuses anything but an ordinary account: a well-known SID
// (SYSTEM, Everyone, Administrators) or a built-in account (RID below 1000)
// would confine far more than one command.
func checkSID(sid string) error {
	m := accountSID.FindStringSubmatch(sid)
	if m == nil {
		return fmt.Errorf("wfp: %q is not a local account SID (S-1-5-21-...)", sid)
	}
	if rid, err := strconv.ParseUint(m[1], 10, 32); err != nil || rid < 1000 {
		return fmt.Errorf("wfp: %q is a built-in account (RID %s), not a dedicated user", sid, m[1])
	}
	return nil
}

// Build returns the filters that confine p.UserSID's processes to
// loopback: per IP version, at the connect layer a permit for the proxy
// and allowed loopback ports (or all of loopback) and a block for the rest,
// and at the accept layer a permit for loopback and a block for the rest.
func Build(p Policy) ([]Filter, error) {
	if err := checkSID(p.UserSID); err != nil {
		return nil, err
	}
	if p.ProxyPort == 0 {
		return nil, errors.New("wfp: no proxy port")
	}
	if slices.Contains(p.LoopbackPorts, 0) {
		return nil, errors.New("wfp: port 0 in the loopback ports")
	}
	user := Condition{Field: fieldUserID, Match: matchEqual,
		SDDL: fmt.Sprintf("D:(A;;%#x;;;%s)", matchFilterAccess, p.UserSID)}
	loopback := Condition{Field: fieldFlags, Match: matchFlagsAllSet, Value: flagIsLoopback}

	connect := []Condition{user, loopback}
	what := "any loopback port"
	if !p.AllLoopback {
		ports := append([]uint16{p.ProxyPort}, p.LoopbackPorts...)
		slices.Sort(ports)
		connect = append(connect, Condition{Field: fieldProtocol, Match: matchEqual, Value: protocolTCP})
		for _, port := range slices.Compact(ports) {
			connect = append(connect, Condition{Field: fieldRemotePort, Match: matchEqual, Value: uint32(port)})
		}
		what = "the proxy and allowed loopback TCP ports"
	}

	var fs []Filter
	for _, v := range []struct{ ip, connect, accept string }{
		{"IPv4", layerConnectV4, layerAcceptV4},
		{"IPv6", layerConnectV6, layerAcceptV6},
	} {
		fs = append(fs,
			Filter{Name: fmt.Sprintf("sluice: confined user may connect to %s (%s)", what, v.ip),
				Layer: v.connect, Action: actionPermit, Weight: permitWeight, Conditions: connect},
			Filter{Name: fmt.Sprintf("sluice: confined user may connect nowhere else (%s)", v.ip),
				Layer: v.connect, Action: actionBlock, Weight: blockWeight, Conditions: []Condition{user}},
			Filter{Name: fmt.Sprintf("sluice: confined user may accept loopback connections (%s)", v.ip),
				Layer: v.accept, Action: actionPermit, Weight: permitWeight, Conditions: []Condition{user, loopback}},
			Filter{Name: fmt.Sprintf("sluice: confined user may accept nothing else (%s)", v.ip),
				Layer: v.accept, Action: actionBlock, Weight: blockWeight, Conditions: []Condition{user}},
		)
	}
	return fs, nil
}

// check refuses a filter Install could not express or should not install.
// Every filter must name a user: a filter without ALE_USER_ID would apply to
// the whole machine.
func (f Filter) check() error {
	switch {
	case f.Name == "":
		return errors.New("wfp: filter without a name")
	case !slices.Contains([]string{layerConnectV4, layerConnectV6, layerAcceptV4, layerAcceptV6}, f.Layer):
		return fmt.Errorf("wfp: %s: unknown layer %q", f.Name, f.Layer)
	case f.Action != actionPermit && f.Action != actionBlock:
		return fmt.Errorf("wfp: %s: unknown action %q", f.Name, f.Action)
	case f.Weight > maxWeight:
		return fmt.Errorf("wfp: %s: weight %d above %d", f.Name, f.Weight, maxWeight)
	case !slices.ContainsFunc(f.Conditions, func(c Condition) bool { return c.Field == fieldUserID }):
		return fmt.Errorf("wfp: %s: no %s condition: it would filter every user", f.Name, fieldUserID)
	}
	for _, c := range f.Conditions {
		if err := c.check(); err != nil {
			return fmt.Errorf("wfp: %s: %w", f.Name, err)
		}
	}
	return nil
}

func (c Condition) check() error {
	ok := false
	switch c.Field {
	case fieldUserID:
		ok = c.Match == matchEqual && strings.HasPrefix(c.SDDL, "D:") && c.Value == 0
	case fieldFlags:
		ok = c.Match == matchFlagsAllSet && c.Value != 0 && c.SDDL == ""
	case fieldProtocol:
		ok = c.Match == matchEqual && c.Value <= 0xff && c.SDDL == ""
	case fieldRemotePort:
		ok = c.Match == matchEqual && c.Value >= 1 && c.Value <= 0xffff && c.SDDL == ""
	}
	if !ok {
		return fmt.Errorf("unsupported condition %v", c)
	}
	return nil
}

// String renders f on one line per condition, for logs and golden files.
func (f Filter) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s weight=%d %q", f.Layer, f.Action, f.Weight, f.Name)
	for _, c := range f.Conditions {
		b.WriteString("\n\t")
		b.WriteString(c.String())
	}
	return b.String()
}

// String renders c as "FIELD match value".
func (c Condition) String() string {
	if c.Field == fieldUserID {
		return fmt.Sprintf("%s %s %s", c.Field, c.Match, c.SDDL)
	}
	if c.Field == fieldFlags {
		return fmt.Sprintf("%s %s %#x", c.Field, c.Match, c.Value)
	}
	return fmt.Sprintf("%s %s %d", c.Field, c.Match, c.Value)
}
