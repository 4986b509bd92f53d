// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ShimName is the hidden subcommand the Landlock mode starts a command
// through (`sluice __confine [--connect-port P]... -- COMMAND`): it reads
// its rules with ParseArgs, confines itself and execs the command.
const ShimName = "__confine"

// connectPortFlag is the shim's flag for one allowed port.
const connectPortFlag = "--connect-port"

// Rules is what a confined command may still do on the network besides
// local IPC.
type Rules struct {
	// ConnectPorts are the TCP ports connect(2) may reach, on any address
	// (Landlock cannot tell addresses apart): the proxy's port and the
	// loopback ports the policy allows. Empty means no TCP connect at all.
	ConnectPorts []uint16
}

// ports returns the allowed ports sorted and without duplicates, or an
// error for port 0, which no connect can use and which would only hide a
// caller's mistake.
func (r Rules) ports() ([]uint16, error) {
	ps := slices.Clone(r.ConnectPorts)
	if slices.Contains(ps, 0) {
		return nil, errors.New("landlock: port 0 in the connect ports")
	}
	slices.Sort(ps)
	return slices.Compact(ps), nil
}

// Args renders r as the shim's flags, "--connect-port P" per port, in the
// form ParseArgs reads back. The caller appends "--" and the command.
func (r Rules) Args() []string {
	args := make([]string, 0, 2*len(r.ConnectPorts))
	for _, p := range r.ConnectPorts {
		args = append(args, connectPortFlag, strconv.Itoa(int(p)))
	}
	return args
}

// ParseArgs reads the shim's command line after the subcommand name:
//
//	[--connect-port P]... -- CMD [ARGS...]
//
// "--connect-port=P" is accepted too. The "--" is required, so that a
// command whose name begins with a dash can never be taken for a flag.
func ParseArgs(args []string) (Rules, []string, error) {
	var r Rules
	for i := 0; i < len(args); i++ {
		a := args[i]
		val, inline := strings.CutPrefix(a, connectPortFlag+"=")
		switch {
		case inline: // val is the port
		case a == "--":
			argv := args[i+1:]
			if len(argv) == 0 {
				return Rules{}, nil, errors.New("landlock: no command after --")
			}
			return r, argv, nil
		case a == connectPortFlag:
			if i+1 == len(args) {
				return Rules{}, nil, fmt.Errorf("landlock: %s needs a port", connectPortFlag)
			}
			i++
			val = args[i]
		default:
			return Rules{}, nil, fmt.Errorf("landlock: unexpected argument %q (want %s P or --)", a, connectPortFlag)
		}
		p, err := strconv.ParseUint(val, 10, 16)
		if err != nil || p == 0 {
			return Rules{}, nil, fmt.Errorf("landlock: %s %q: not a port from 1 to 65535", connectPortFlag, val)
		}
		r.ConnectPorts = append(r.ConnectPorts, uint16(p))
	}
	return Rules{}, nil, errors.New("landlock: missing -- before the command")
}
