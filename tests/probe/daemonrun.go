// SPDX-License-Identifier: Apache-2.0

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/sluice-dev/sluice/api"
)

// runDaemonRun asks the sluice daemon on SOCKET to run PATH as uid 65534,
// with this probe's stdio, and reports the daemon's refusal or the
// command's exit status. It lets a test call the daemon from places the
// sluice binary cannot run, such as a chroot without a C library.
func runDaemonRun(args []string, r *result) error {
	socket, path := args[0], args[1]
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c := api.NewClient(socket)
	code, err := c.Run(ctx, api.CreateRequest{User: "65534:65534", Argv: []string{path}, Path: path, NoProxyEnv: true},
		[3]*os.File{os.Stdin, os.Stderr, os.Stderr}, nil, nil)
	if err != nil {
		return &stageError{stage: "create", err: err}
	}
	if code != 0 {
		return &stageError{stage: "wait", err: errors.New("exit status " + strconv.Itoa(code))}
	}
	r.Reply = fmt.Sprintf("exit %d", code)
	return nil
}
