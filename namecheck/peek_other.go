// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package namecheck

import (
	"errors"
	"net"
)

// PeekFlight is Linux's: elsewhere the verifier reads the first flight
// (ReadFlight) and writes it upstream itself.
func PeekFlight(*net.TCPConn) ([]byte, Flight, error) {
	return nil, Flight{}, errors.ErrUnsupported
}
