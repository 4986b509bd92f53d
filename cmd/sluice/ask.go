// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluice-dev/sluice/allowlist"
	"github.com/sluice-dev/sluice/report"
)

// `sluice run --ask` (docs/ask.md). The flag takes an optional value:
// --ask (or --ask=on) asks a person through the daemon, --ask=never asks
// no one: what would have been asked is denied at once and listed, with
// the allowlist entries that would have allowed it, when the command
// exits (and in $GITHUB_STEP_SUMMARY when that is set). A non-interactive
// job (CI=true) turns --ask into --ask=never: nobody is there to answer.
const (
	askOff   = ""
	askOn    = "on"
	askNever = "never"
)

// askMode checks --ask's value against the environment.
func askMode(v string, getenv func(string) string) (string, error) {
	switch strings.ToLower(v) {
	case "", "off", "false":
		return askOff, nil
	case "on", "true", "yes":
		if ci := strings.ToLower(getenv("CI")); ci == "true" || ci == "1" {
			return askNever, nil
		}
		return askOn, nil
	case "never", "no":
		return askNever, nil
	}
	return "", fmt.Errorf("--ask=%q: want --ask (ask a person) or --ask=never (deny at once and list what would have been asked)", v)
}

// writeWouldAsk lists, for --ask=never, what would have been asked and the
// allowlist diff that would have allowed it: on stderr, and as markdown
// appended to summaryPath ("" for none).
func writeWouldAsk(rep *report.Reporter, base *allowlist.Policy, stderr io.Writer, summaryPath string) {
	add := rep.Suggestion().Additions(base)
	if len(add) == 0 {
		return
	}
	fmt.Fprintf(stderr, "sluice: --ask=never: denied without asking (no one to answer); would have asked for %d destination%s:\n", len(add), map[bool]string{true: "", false: "s"}[len(add) == 1])
	for _, a := range add {
		fmt.Fprintf(stderr, "sluice:   would ask: %s\n", a)
	}
	fmt.Fprintln(stderr, "sluice: allowlist diff that would have allowed them:")
	for _, a := range add {
		fmt.Fprintf(stderr, "+ %q\n", a)
	}
	if summaryPath == "" {
		return
	}
	f, err := os.OpenFile(summaryPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintf(stderr, "sluice: job summary: %v\n", err)
		return
	}
	defer f.Close()
	var b strings.Builder
	b.WriteString("### sluice: would have asked\n\nDenied at once (`--ask=never`: no one to answer in this job):\n\n")
	for _, a := range add {
		fmt.Fprintf(&b, "- `%s`\n", a)
	}
	b.WriteString("\nThe allowlist diff that would have allowed them:\n\n```diff\n")
	for _, a := range add {
		fmt.Fprintf(&b, "+ %q\n", a)
	}
	b.WriteString("```\n")
	_, _ = f.WriteString(b.String())
}
