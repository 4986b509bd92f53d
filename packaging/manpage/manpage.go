// SPDX-License-Identifier: Apache-2.0

// Package manpage writes man pages (roff, section 1) for a cobra command
// tree: sluice.1 for the root and sluice-run.1 and so on for each visible
// subcommand, with the synopsis, description, options, examples and the
// related pages.
//
// Decisions:
//   - Its own small writer rather than cobra/doc: cobra/doc renders through
//     go-md2man, which this project does not depend on; the commands' help
//     texts are plain text, which roff takes nearly as is.
//   - No date in the pages (the .TH date field is left to the version), so
//     building the packages twice gives identical bytes.
package manpage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Write writes one page per visible command under root into dir, named
// like the command path ("sluice-sessions-show.1"), and returns their names.
func Write(dir string, root *cobra.Command, version string) ([]string, error) {
	var names []string
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !visible(c) {
			return nil
		}
		name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
		if err := os.WriteFile(filepath.Join(dir, name), Page(c, version), 0o644); err != nil {
			return fmt.Errorf("man page %s: %w", name, err)
		}
		names = append(names, name)
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return names, nil
}

func visible(c *cobra.Command) bool {
	return !c.Hidden && c.Name() != "help" && (c.IsAvailableCommand() || !c.HasParent())
}

// Page renders one command's page.
func Page(c *cobra.Command, version string) []byte {
	var b bytes.Buffer
	title := strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-"))
	fmt.Fprintf(&b, ".TH %s 1 \"\" %s \"sluice manual\"\n", quote(title), quote("sluice "+version))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", escape(strings.ReplaceAll(c.CommandPath(), " ", "-")), escape(c.Short))
	b.WriteString(".SH SYNOPSIS\n")
	fmt.Fprintf(&b, ".B %s\n", escape(c.UseLine()))
	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	paragraphs(&b, desc)
	if opts := flagList(c.NonInheritedFlags()); opts != "" {
		b.WriteString(".SH OPTIONS\n")
		b.WriteString(opts)
	}
	if opts := flagList(c.InheritedFlags()); opts != "" {
		b.WriteString(".SH OPTIONS INHERITED FROM PARENT COMMANDS\n")
		b.WriteString(opts)
	}
	if c.Example != "" {
		b.WriteString(".SH EXAMPLES\n.nf\n")
		for _, line := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
			b.WriteString(escapeLine(strings.TrimPrefix(line, "  ")) + "\n")
		}
		b.WriteString(".fi\n")
	}
	var see []string
	if c.HasParent() {
		see = append(see, strings.ReplaceAll(c.Parent().CommandPath(), " ", "-"))
	}
	for _, sub := range c.Commands() {
		if visible(sub) {
			see = append(see, strings.ReplaceAll(sub.CommandPath(), " ", "-"))
		}
	}
	sort.Strings(see)
	if len(see) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, s := range see {
			sep := ","
			if i == len(see)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, ".BR %s (1)%s\n", escape(s), sep)
		}
	}
	return b.Bytes()
}

// paragraphs writes text as roff paragraphs, keeping indented lines
// (examples inside the description) as they are.
func paragraphs(b *bytes.Buffer, text string) {
	for i, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(p, "\n")
		if strings.HasPrefix(lines[0], " ") || strings.HasPrefix(lines[0], "\t") {
			b.WriteString(".nf\n")
			for _, l := range lines {
				b.WriteString(escapeLine(l) + "\n")
			}
			b.WriteString(".fi\n")
			continue
		}
		for _, l := range lines {
			b.WriteString(escapeLine(strings.TrimSpace(l)) + "\n")
		}
	}
}

func flagList(fs *pflag.FlagSet) string {
	var b strings.Builder
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		varname, usage := pflag.UnquoteUsage(f)
		head := `\fB\-\-` + escape(f.Name) + `\fR`
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			head = `\fB\-` + escape(f.Shorthand) + `\fR, ` + head
		}
		if varname != "" {
			head += " \\fI" + escape(varname) + "\\fR"
		}
		b.WriteString(".TP\n" + head + "\n" + escapeLine(usage))
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0" && f.DefValue != "0s" {
			b.WriteString(" (default " + escape(f.DefValue) + ")")
		}
		b.WriteString("\n")
	})
	return b.String()
}

// escape makes text safe inside a roff line.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// escapeLine is escape for a whole line, which must not start with a
// control character.
func escapeLine(s string) string {
	s = escape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func quote(s string) string { return `"` + strings.ReplaceAll(escape(s), `"`, `\(dq`) + `"` }
