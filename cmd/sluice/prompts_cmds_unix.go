// SPDX-License-Identifier: Apache-2.0

//go:build unix

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/api"
)

// Ask mode's commands (docs/ask.md): they talk to the daemon only, and
// the daemon refuses them from inside any session.

func newPromptsCmd() *cobra.Command {
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "prompts",
		Short: "List (-f: follow) the pending ask-mode prompts of your sessions",
		Example: `  sluice prompts -f
  sluice approve 1a2b3c4d --session`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if follow {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
				defer stop()
				if !asJSON {
					fmt.Fprintln(out, "STATE\tID\tSESSION\tNAME\tASKED BY")
				}
				return client().FollowPrompts(ctx, func(p api.Prompt) { printPrompt(out, p, asJSON) })
			}
			ps, err := client().Prompts(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				for _, p := range ps {
					printPrompt(out, p, true)
				}
				return nil
			}
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSESSION\tNAME\tASKED BY\tDENIED IN")
			for _, p := range ps {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.Session, p.Name, p.AskedBy, time.Until(p.Expires).Round(time.Second))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow: print prompts as they are raised and answered")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object a line (id, session, name, kind, asked_by, asked, expires, state)")
	return cmd
}

func printPrompt(w io.Writer, p api.Prompt, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(p)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.State, p.ID, p.Session, p.Name, p.AskedBy)
}

func newApproveCmd() *cobra.Command {
	var once, session, always bool
	cmd := &cobra.Command{
		Use:   "approve ID",
		Short: "Approve a pending prompt: --once (default), --session, or --always (machine allowlist: root or the admin group)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope := "once"
			n := 0
			for _, f := range []struct {
				set  bool
				name string
			}{{once, "once"}, {session, "session"}, {always, "always"}} {
				if f.set {
					scope = f.name
					n++
				}
			}
			if n > 1 {
				return errors.New("approve: give one of --once, --session, --always")
			}
			p, err := client().AnswerPrompt(cmd.Context(), args[0], api.PromptAnswer{Decision: "approve", Scope: scope})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sluice: allowed %s for session %s (%s)\n", p.Name, p.Session, scope)
			return nil
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "this answer's addresses only, until their TTL (the default)")
	cmd.Flags().BoolVar(&session, "session", false, "the name for the rest of the session")
	cmd.Flags().BoolVar(&always, "always", false, "write the name to the machine allowlist, owned by user:YOU")
	return cmd
}

// promptID is the form of a prompt's id: `sluice deny ID` answers a
// prompt, `sluice deny ENTRY...` removes allowlist entries.
var promptID = regexp.MustCompile(`^[0-9a-f]{8}$`)

// denyPrompt answers `sluice deny ID`; handled is false when there is no
// such prompt, and the argument is taken as an allowlist entry.
func denyPrompt(cmd *cobra.Command, id string) (handled bool, err error) {
	if !promptID.MatchString(id) {
		return false, nil
	}
	p, err := client().AnswerPrompt(cmd.Context(), id, api.PromptAnswer{Decision: "deny"})
	var se *api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "sluice: denied %s for session %s\n", p.Name, p.Session)
	return true, nil
}
