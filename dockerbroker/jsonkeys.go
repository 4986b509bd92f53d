// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// One body, one reading: the judge and the engine must read the same
// request.
//
// Go's encoding/json, which both the judge and the engine decode with,
// matches object keys to struct fields without regard to case and lets
// the last of two matching keys win. The judge reads the client's bytes
// into a struct, but the body it forwards is re-encoded from a map, which
// keeps "Privileged" and "privileged" apart and writes them sorted: a body
// {"privileged":true,"Privileged":false} would be judged unprivileged and
// run privileged. So a body with two keys of one object that are equal
// without regard to case (Unicode simple folding, as encoding/json folds)
// is refused before it is judged, and the rewrite sets fields under the
// key the client used.

// errRepeatedKey is a body with two keys equal without regard to case.
var errRepeatedKey = errors.New("repeated key")

// checkKeys refuses a JSON body in which an object has two keys equal
// without regard to case.
func checkKeys(body []byte) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := walkValue(d); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// walkValue reads one value from d, checking the keys of every object in
// it.
func walkValue(d *json.Decoder) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		var keys []string
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			for _, seen := range keys {
				if strings.EqualFold(seen, k) {
					return fmt.Errorf("%w %q (and %q): the engine would read only one of them", errRepeatedKey, k, seen)
				}
			}
			keys = append(keys, k)
			if err := walkValue(d); err != nil {
				return err
			}
		}
		_, err = d.Token() // '}'
		return err
	case json.Delim('['):
		for d.More() {
			if err := walkValue(d); err != nil {
				return err
			}
		}
		_, err = d.Token() // ']'
		return err
	}
	return nil
}

// keyFor is the key of m that the engine reads as name: the client's own
// spelling when it used one, else name.
func keyFor(m map[string]any, name string) string {
	for k := range m {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	return name
}
