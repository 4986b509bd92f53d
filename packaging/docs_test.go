// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// readmeMax is README's budget: it is the front door, read in five
// minutes; the reference lives in docs/.
const readmeMax = 12 * 1024

// TestREADMEIsAFrontDoor holds README to its budget, to its two commands
// first (they are what .ci/run and packaging/test-deb.sh run), and to
// linking every file of docs/, so that nothing moved there is lost.
func TestREADMEIsAFrontDoor(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) >= readmeMax {
		t.Errorf("README.md is %d bytes, the budget is under %d: move reference material to docs/", len(b), readmeMax)
	}

	// The first code block is the two commands, and both are targets the
	// Makefile has.
	block := firstFence(string(b))
	var cmds []string
	for _, l := range strings.Split(block, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "sudo" && f[1] == "make" {
			cmds = append(cmds, f[2])
		}
	}
	if strings.Join(cmds, " ") != "demo test" {
		t.Errorf("README's first code block runs %q, want `sudo make demo` then `sudo make test`:\n%s", cmds, block)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		if !regexp.MustCompile(`(?m)^` + c + `:`).Match(mk) {
			t.Errorf("README runs `make %s`, which the Makefile has no target for", c)
		}
	}

	// Every document in docs/ is reachable from README.
	linked := map[string]bool{}
	for _, l := range markdownLinks(string(b)) {
		target, _, _ := strings.Cut(l.target, "#")
		linked[path.Clean(target)] = true
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	for _, d := range docs {
		if name := "docs/" + filepath.Base(d); !linked[name] {
			t.Errorf("README.md does not link %s", name)
		}
	}
}

// TestREADMEPackageLines runs .ci/packages, which reads README's two
// package lines: CI installs exactly what it prints.
func TestREADMEPackageLines(t *testing.T) {
	for _, arg := range [][]string{nil, {"deb-test"}} {
		out, err := exec.Command("../.ci/packages", arg...).Output()
		if err != nil {
			t.Fatalf(".ci/packages %v: %v\n%s", arg, err, stderrText(err))
		}
		if len(strings.Fields(string(out))) == 0 {
			t.Errorf(".ci/packages %v printed no package", arg)
		}
	}
}

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file exists, and an anchor names a heading of the linked document.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	checked := 0
	for _, f := range files {
		problems, n, err := checkLinks(f)
		if err != nil {
			t.Fatal(err)
		}
		checked += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d relative links found: the scan is broken", checked)
	}
}

// TestCheckLinksFindsBrokenOnes shows the checker can fail: a missing
// file, a missing anchor and a missing in-page anchor are reported; a
// good link, a code span and a fenced block are not.
func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.md", "# B\n\n## What a session cannot do, and how to allow it\n\n## `sluice run` inside a container\n")
	write("a.md", "# A: the start\n\n"+
		"[ok](b.md) [ok2](b.md#what-a-session-cannot-do-and-how-to-allow-it) [ok3](b.md#sluice-run-inside-a-container)\n"+
		"[self](#a-the-start) [web](https://example.com/x) `[code](nothere.md)`\n"+
		"```\n[fenced](nothere.md)\n```\n"+
		"[gone](missing.md) [noanchor](b.md#nope) [noself](#nope)\n")
	problems, n, err := checkLinks(filepath.Join(dir, "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Errorf("checked %d relative links, want 7", n)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{"missing.md", "b.md#nope", "(#nope)"} {
		if !strings.Contains(got, want) {
			t.Errorf("broken link %s not reported; got:\n%s", want, got)
		}
	}
	if len(problems) != 3 {
		t.Errorf("%d problems, want 3:\n%s", len(problems), got)
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	fenceRE = regexp.MustCompile("(?m)^\\s*```")
	codeRE  = regexp.MustCompile("`[^`\n]*`")
	linkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// markdownLinks returns the targets of the inline links of a markdown
// text, outside fenced blocks and code spans.
func markdownLinks(s string) []mdLink {
	var out []mdLink
	inFence := false
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if fenceRE.MatchString(l) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeRE.ReplaceAllString(l, ""), -1) {
			out = append(out, mdLink{n, m[1]})
		}
	}
	return out
}

// checkLinks reports the broken relative links of one markdown file and
// how many relative links it checked.
func checkLinks(file string) (problems []string, checked int, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, err
	}
	for _, l := range markdownLinks(string(b)) {
		if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(l.target) {
			continue // https:, mailto:
		}
		checked++
		target, anchor, _ := strings.Cut(l.target, "#")
		where := fmt.Sprintf("%s:%d: link (%s)", filepath.Base(file), l.line, l.target)
		doc := file
		if target != "" {
			doc = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
			if _, err := os.Stat(doc); err != nil {
				problems = append(problems, where+": no such file")
				continue
			}
		}
		if anchor == "" {
			continue
		}
		if !strings.HasSuffix(doc, ".md") {
			problems = append(problems, where+": an anchor into a file that is not markdown")
			continue
		}
		anchors, err := headingAnchors(doc)
		if err != nil {
			return nil, 0, err
		}
		if !anchors[anchor] {
			problems = append(problems, where+": no heading with that anchor in "+filepath.Base(doc)+" (has: "+strings.Join(keys(anchors), ", ")+")")
		}
	}
	return problems, checked, nil
}

// headingAnchors returns the anchors GitHub gives a markdown file's
// headings: lower case, punctuation dropped, spaces made hyphens, a
// repeated one suffixed -1, -2...
func headingAnchors(file string) (map[string]bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, l := range strings.Split(string(b), "\n") {
		if fenceRE.MatchString(l) {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var slug bytes.Buffer
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func stderrText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// firstFence returns the body of a markdown text's first fenced block.
func firstFence(s string) string {
	loc := fenceRE.FindAllStringIndex(s, 2)
	if len(loc) < 2 {
		return ""
	}
	body := s[loc[0][1]:loc[1][0]]
	_, body, _ = strings.Cut(body, "\n") // the rest of the opening line: its language
	return body
}
