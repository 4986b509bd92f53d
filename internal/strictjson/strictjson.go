// SPDX-License-Identifier: Apache-2.0

// Package strictjson decodes a configuration file's JSON object the way
// an administrator needs: a key that names no field, a key given twice or
// text after the object is an error, and every error says where it is as
// a line and column. The daemon's --config file is read this way.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Decode unmarshals the JSON object b into the struct *v and refuses
// what a plain json.Unmarshal would let through silently: a key that names
// no field (a misspelt "dns_upstream" would otherwise leave the daemon on
// its defaults without a word), a key given twice, and text after the
// object. Every error says where, as line:column, so the administrator can
// find it in the file.
func Decode(b []byte, v any) error {
	known := jsonFields(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return positioned(b, err, dec.InputOffset())
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("%s: want a JSON object", position(b, 0))
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return positioned(b, err, dec.InputOffset())
		}
		key, _ := tok.(string)
		// The offset is just past the key's closing quote; the key starts
		// at its opening one.
		start := int64(bytes.LastIndexByte(b[:dec.InputOffset()-1], '"'))
		if _, ok := known[key]; !ok {
			return fmt.Errorf("%s: unknown key %q (known keys: %s)", position(b, start), key, strings.Join(sortedKeys(known), ", "))
		}
		if seen[key] {
			return fmt.Errorf("%s: key %q given twice", position(b, start), key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return positioned(b, err, dec.InputOffset())
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return positioned(b, err, dec.InputOffset())
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("%s: text after the JSON object", position(b, dec.InputOffset()))
	}
	// The keys are known: now the types.
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s: key %q: want %s, not a JSON %s", position(b, te.Offset), te.Field, te.Type, te.Value)
		}
		return err
	}
	return nil
}

// positioned adds the position to a decoding error: a syntax error's own
// offset when it has one, else off.
func positioned(b []byte, err error, off int64) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	return fmt.Errorf("%s: %w", position(b, off), err)
}

// position renders a byte offset of b as "line L, column C" (both from 1).
func position(b []byte, off int64) string {
	off = min(max(off, 0), int64(len(b)))
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// jsonFields returns the JSON key names of struct type t's exported fields.
func jsonFields(t reflect.Type) map[string]struct{} {
	keys := map[string]struct{}{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		keys[name] = struct{}{}
	}
	return keys
}

func sortedKeys(m map[string]struct{}) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
