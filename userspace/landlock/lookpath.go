// SPDX-License-Identifier: Apache-2.0

package landlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// defaultPath is searched when the command's environment has no PATH, as
// glibc's execvp does without one.
const defaultPath = "/bin:/usr/bin"

// lookPath finds file the way a shell would, but on the PATH of env, the
// environment the command will get, rather than on the shim's own. A name
// with a slash is used as it is. Empty PATH entries (the current directory)
// are skipped, as os/exec does since Go 1.19: a program dropped into the
// working directory must not shadow a system command.
func lookPath(file string, env []string) (string, error) {
	if file == "" {
		return "", errors.New("landlock: empty command name")
	}
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", fmt.Errorf("landlock: command %s: %w", file, err)
		}
		return file, nil
	}
	path, ok := envLookup(env, "PATH")
	if !ok {
		path = defaultPath
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("landlock: command %q not found on PATH %q", file, path)
}

// executable reports whether path is a regular file with an execute bit.
func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return errors.New("not executable")
	}
	return nil
}

// envLookup returns the first value of key in env, as getenv(3) does.
func envLookup(env []string, key string) (string, bool) {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}
