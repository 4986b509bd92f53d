// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import (
	"fmt"
	"io"
)

func status(w io.Writer) error {
	fmt.Fprintln(w, "datapath: kernel enforcement is only available on Linux")
	return nil
}
