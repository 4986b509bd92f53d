// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/audit"
)

func client() *api.Client { return api.NewClient(daemonSocket()) }

// daemonSocket is the daemon's API socket: --socket, else $SLUICE_SOCKET
// or the default.
func daemonSocket() string { return api.SocketPath(socketFlag) }

func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the daemon's sessions you may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ss, err := client().Sessions(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tUID\tAGE\tPROCS\tALLOWED\tDENIED\tLEARNED\tPOLICY\tCOMMAND")
			for _, s := range ss {
				// POLICY: a container session's named policy (its
				// sluice.policy label); "-" for the others.
				policy := s.PolicyName
				if policy == "" {
					policy = "-"
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Name, s.UID, time.Since(s.Created).Round(time.Second),
					s.Processes, s.Allowed, s.Denied, s.LearnedIPs, policy, strings.Join(s.Argv, " "))
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show SESSION",
		Short: "Show a session: its policy, counters and recent denials",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := client().Session(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(s)
		},
	}, &cobra.Command{
		Use:   "kill SESSION",
		Short: "Kill every process of a session and remove it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return client().Kill(cmd.Context(), args[0])
		},
	})
	return cmd
}

func newEventsCmd() *cobra.Command {
	var follow bool
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Stream the daemon's events (denials, DNS refusals, policy changes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			if !follow {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			return client().Events(ctx, func(e audit.Event) {
				if asJSON {
					_ = enc.Encode(e)
					return
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %-22s %s %s\n", e.Time.Local().Format(time.TimeOnly), e.Type, e.Session, e.Message)
			})
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming new events")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON lines (the audit log schema)")
	return cmd
}

func newAllowCmd() *cobra.Command {
	var owner string
	cmd := &cobra.Command{
		Use:   "allow ENTRY...",
		Short: "Add entries to the machine allowlist (root or the admin group)",
		Example: `  sluice allow --owner provider:openai api.openai.com
  sluice allow '*.githubusercontent.com' 203.0.113.0/24`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := client().Allow(cmd.Context(), api.AllowRequest{Entries: args, Owner: owner}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice: allowed %s\n", strings.Join(args, " "))
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "who needs these entries (for `sluice revoke OWNER`)")
	return cmd
}

func newDenyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "deny ID | ENTRY...",
		Short: "Deny a pending prompt (ID), or remove entries from the machine allowlist, whoever added them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if handled, err := denyPrompt(cmd, args[0]); handled {
					return err
				}
			}
			if err := client().Deny(cmd.Context(), api.AllowRequest{Entries: args}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice: removed %s\n", strings.Join(args, " "))
			return nil
		},
	}
}

func newRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke OWNER",
		Short: "Remove an owner's entries, except those another owner still needs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client().Revoke(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice: removed %s\n", strings.Join(r.Removed, " "))
			if len(r.Kept) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "sluice: kept %s (other owners need them)\n", strings.Join(r.Kept, " "))
			}
			return nil
		},
	}
}
