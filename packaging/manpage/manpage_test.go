// SPDX-License-Identifier: Apache-2.0

package manpage

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "sluice", Short: "Kernel-level egress enforcement"}
	root.PersistentFlags().String("socket", "", "the daemon's API socket")
	run := &cobra.Command{Use: "run [flags] -- COMMAND", Short: "Run a command confined",
		Long:    "Run COMMAND confined.\n.dotted line\n\n  indented example\n\nAnother paragraph with a \\ backslash.",
		Example: "  sudo sluice run --allow 203.0.113.0/24 -- agent", Run: func(*cobra.Command, []string) {}}
	run.Flags().StringArray("allow", nil, "allow a `HOST` (repeatable)")
	run.Flags().StringP("output", "o", "", "write to `FILE`")
	hidden := &cobra.Command{Use: "secret", Hidden: true, Run: func(*cobra.Command, []string) {}}
	root.AddCommand(run, hidden)
	return root
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	names, err := Write(dir, tree(), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"sluice-run.1", "sluice.1"}) {
		t.Fatalf("pages %v, want sluice.1 and sluice-run.1 (no hidden or help pages)", names)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sluice-run.1"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`.TH "SLUICE\-RUN" 1 "" "sluice 1.2.3"`,
		".SH NAME\nsluice\\-run \\- Run a command confined\n",
		`\fB\-\-allow\fR \fIHOST\fR`,
		`\fB\-o\fR, \fB\-\-output\fR \fIFILE\fR`,
		".SH OPTIONS INHERITED FROM PARENT COMMANDS",
		"\\&.dotted line",
		".nf\n  indented example\n.fi\n",
		`a \e backslash`,
		"sudo sluice run \\-\\-allow 203.0.113.0/24 \\-\\- agent",
		".BR sluice (1)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "'") {
			t.Errorf("a text line starts with a control character: %q", line)
		}
	}
}

// Two renderings are identical: no dates, no map order.
func TestPageIsReproducible(t *testing.T) {
	a, b := Page(tree().Commands()[0], "v"), Page(tree().Commands()[0], "v")
	if !bytes.Equal(a, b) {
		t.Error("two renderings differ")
	}
}
