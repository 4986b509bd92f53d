// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// CheckHiddenPath says why p cannot be a "hidden_paths" entry: it must be
// absolute or start with "~/" (the home of the user the command runs as),
// be clean (no "." or ".." elements, no trailing slash) and be a valid glob
// (path/filepath.Match syntax). The root and the home directory themselves
// are refused: hiding them would hide everything.
func CheckHiddenPath(p string) error {
	rest := p
	if r, ok := strings.CutPrefix(p, "~/"); ok {
		rest = "/" + r
	} else if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("hidden path %q: must be absolute or start with ~/", p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("hidden path %q: contains a NUL byte", p)
	}
	if clean := filepath.Clean(rest); clean != rest {
		if strings.HasPrefix(p, "~/") {
			clean = "~" + clean
		}
		return fmt.Errorf("hidden path %q: not clean (write %q)", p, clean)
	}
	if rest == "/" {
		return fmt.Errorf("hidden path %q: hiding the root or the home directory would hide everything", p)
	}
	if _, err := filepath.Match(rest, ""); err != nil {
		return fmt.Errorf("hidden path %q: bad glob: %w", p, err)
	}
	return nil
}

// HiddenPaths are the file's "hidden_paths": files and directories that
// sessions under this policy hide on top of the built-in list (package
// sandbox). Merging policies unites their lists, so a session can only
// hide more than the machine does.
func (p *Policy) HiddenPaths() []string {
	if p == nil {
		return nil
	}
	return slices.Clone(p.hidden)
}

// WithHiddenPaths returns p with paths added to its hidden paths, after
// checking each with CheckHiddenPath.
func (p *Policy) WithHiddenPaths(paths ...string) (*Policy, error) {
	var errs []error
	for _, h := range paths {
		if err := CheckHiddenPath(h); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	b := newBuilder()
	b.addPolicy(p)
	b.addHidden(paths)
	return b.policy(), nil
}

func (b *builder) addHidden(paths []string) {
	for _, h := range paths {
		if !slices.Contains(b.hidden, h) {
			b.hidden = append(b.hidden, h)
		}
	}
}

// hiddenPaths reads the value of hidden_paths: a list of strings, each
// checked with CheckHiddenPath; every bad one is reported with its place.
func (fp *fileParser) hiddenPaths() error {
	raw, at, err := fp.value()
	if err != nil {
		return err
	}
	switch raw[0] {
	case 'n':
		return nil
	case '[':
	default:
		fp.errs = append(fp.errs, fp.fileError(at, fmt.Errorf(`"hidden_paths" must be a list of paths, not %s`, jsonKind(raw))))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return fp.fileError(at, err)
	}
	for dec.More() {
		elAt := at + skipJSONSpace(raw, int(dec.InputOffset()))
		var el json.RawMessage
		if err := dec.Decode(&el); err != nil {
			return fp.fileError(elAt, err)
		}
		var s string
		if el[0] != '"' || json.Unmarshal(el, &s) != nil {
			fp.errs = append(fp.errs, fp.fileError(elAt, fmt.Errorf(`a hidden path must be a string, not %s`, jsonKind(el))))
			continue
		}
		if err := CheckHiddenPath(s); err != nil {
			fp.errs = append(fp.errs, fp.fileError(elAt, err))
			continue
		}
		fp.b.addHidden([]string{s})
	}
	return nil
}
