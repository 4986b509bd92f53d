// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/suggest"
)

// newSuggestCmd is `sluice suggest`: --suggest-allowlist after the fact,
// from an audit log (the daemon's, or a `sluice run --audit-log` file a CI
// job kept as an artifact).
func newSuggestCmd() *cobra.Command {
	var from, base, out string
	var sessions []string
	var ports bool
	cmd := &cobra.Command{
		Use:   "suggest --from AUDIT_LOG [--session NAME]... [--allowlist FILE] [-o FILE]",
		Short: "Write the allowlist that would have allowed what an audit log shows was refused",
		Long: `Read an audit log (docs/audit.md) and write a network_allowlist.json that would
have let its sessions do what they were refused, or with --audit would have
been: the sessions' own entries (or --allowlist FILE) plus every refused name
and every address dialled without an allowed name. It is a starting point to
review, like sluice run --suggest-allowlist. A malformed line is an error and
nothing is written.`,
		Example: `  sluice suggest --from audit.jsonl -o network_allowlist.json
  sluice suggest --from /var/log/sluice/audit.jsonl --session run-4242-0123456789ab --allowlist ci.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return &exitError{code: exitSluiceError, err: errors.New("--from: name the audit log to read")}
			}
			f, err := os.Open(from)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			defer f.Close()
			sug, entries, seen, err := suggest.FromAudit(f, sessions)
			if err != nil {
				return &exitError{code: exitSluiceError, err: fmt.Errorf("%s: %w", from, err)}
			}
			for _, s := range sessions {
				if !seen[s] {
					return &exitError{code: exitSluiceError, err: fmt.Errorf("%s: no lines of session %s", from, s)}
				}
			}
			var p *allowlist.Policy
			if base != "" {
				p, err = allowlist.Load(base)
			} else if p, err = allowlist.FromStrings(entries); err != nil {
				err = fmt.Errorf("%s: the sessions' entries: %w", from, err)
			}
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			sug.SetPorts(ports)
			merged, add, err := sug.Render(p)
			if err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			stderr := cmd.ErrOrStderr()
			if out == "" || out == "-" {
				if _, err := cmd.OutOrStdout().Write(merged.Format()); err != nil {
					return &exitError{code: exitSluiceError, err: err}
				}
				sug.Explain(stderr, "(standard output)", merged, add)
				return nil
			}
			if err := suggest.WriteFile(out, merged.Format()); err != nil {
				return &exitError{code: exitSluiceError, err: err}
			}
			sug.Explain(stderr, out, merged, add)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the audit log to read (JSON lines, docs/audit.md)")
	fl.StringArrayVar(&sessions, "session", nil, "only this session's lines (repeatable; default: every session in the log)")
	fl.StringVar(&base, "allowlist", "", "build on this network_allowlist.json instead of the sessions' own entries")
	fl.BoolVar(&ports, "ports", false, "give each added entry the TCP and UDP ports it was refused on, not every port")
	fl.StringVarP(&out, "output", "o", "", "write the suggestion to `FILE` (default: standard output)")
	return cmd
}
