// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package main

import "github.com/spf13/cobra"

func newFamiliesCmd() *cobra.Command { return &cobra.Command{Use: "__families", Hidden: true} }
