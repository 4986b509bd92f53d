// SPDX-License-Identifier: Apache-2.0

// Package atomicfile replaces a file so that a reader sees the old
// content or the new, never a part: the new content goes to a temporary
// file in the same directory (the same file system, so the rename is
// atomic), which is given its mode and then renamed over the old one. A
// failure leaves the old file as it was and no temporary file behind.
//
// The daemon's adopt records and allowlist file and `sluice run
// --suggest-allowlist`'s output are written this way. It does not fsync:
// these files are rewritten when they change, and none of them is the only
// copy of what it holds.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm (exactly: the umask does not
// apply). prepare, when not nil, is called with the written temporary
// file before it is closed and renamed (to give it an owner, say); its
// error stops the replacement.
func Write(path string, data []byte, perm os.FileMode, prepare func(*os.File) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename: nothing there, an error ignored
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if prepare != nil {
		if err := prepare(tmp); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return os.Rename(tmp.Name(), path)
}
