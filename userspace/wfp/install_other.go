// SPDX-License-Identifier: Apache-2.0

//go:build sluice_wfp && (!windows || !(amd64 || arm64))

package wfp

import (
	"errors"
	"fmt"
	"io"
)

// Install adds the filters in a dynamic WFP session on 64-bit Windows;
// elsewhere it returns an error and changes nothing.
func Install(filters []Filter) (io.Closer, error) {
	return nil, fmt.Errorf("wfp: %w: the Windows Filtering Platform needs 64-bit Windows", errors.ErrUnsupported)
}
