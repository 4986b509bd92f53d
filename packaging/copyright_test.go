// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"strings"
	"testing"
)

// TestDebianCopyright: packaging/copyright (the .deb's
// /usr/share/doc/sluice/copyright) is a machine-readable DEP-5 file whose
// Files stanzas say what the SPDX lines say (Apache-2.0 for the tree,
// the kernel's dual for bpf/), and every licence they name has its own
// stanza with its text, so the file stands on its own.
func TestDebianCopyright(t *testing.T) {
	b, err := os.ReadFile("copyright")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.HasPrefix(text, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Fatal("copyright: the first line is not DEP-5's Format: field")
	}
	files := map[string]string{} // Files: pattern -> License:
	standalone := map[string]bool{}
	for _, para := range strings.Split(text, "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(para, "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, " ") {
				fields[k] = v
			}
		}
		switch {
		case fields["Files"] != "":
			files[fields["Files"]] = fields["License"]
		case fields["License"] != "" && fields["Format"] == "":
			if strings.Count(para, "\n") < 3 {
				t.Errorf("licence %s: no text", fields["License"])
			}
			standalone[fields["License"]] = true
		}
	}
	if files["*"] != "Apache-2.0" || files["bpf/*"] != "GPL-2 or BSD-2-clause" {
		t.Errorf("Files stanzas %v, want * Apache-2.0 and bpf/* GPL-2 or BSD-2-clause", files)
	}
	for _, l := range files {
		for _, name := range strings.Split(l, " or ") {
			if !standalone[name] {
				t.Errorf("licence %s has no stanza of its own", name)
			}
		}
	}
}
