// SPDX-License-Identifier: Apache-2.0

package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"unicode/utf8"
)

// MaxFileSize bounds what Load reads, so that a path pointing at a device or
// a runaway file fails clearly instead of exhausting memory.
const MaxFileSize = 16 << 20

// Load reads and parses a policy file (network_allowlist.json). Every error
// names the file; parse problems are an *Error inside.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("allowlist: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("allowlist %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("allowlist %s: larger than %d bytes", path, MaxFileSize)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("allowlist %s: %w", path, err)
	}
	return p, nil
}

// Parse parses the contents of a policy file:
//
//	{"allowed_hosts": ["api.example.com", "*.example.org", "203.0.113.0/24",
//	  {"host": "api.example.net", "owner": "provider:example", "allow_private": true}]}
//
// An element is an entry string or an object with "host" (required),
// "owner", "allow_private" and "ports" (ParsePorts; without it, every
// port). Keys are case-sensitive, and unknown or
// repeated keys are errors so that typos do not pass silently. A missing or
// null "allowed_hosts" and an empty list give an empty policy. A leading
// UTF-8 byte order mark is ignored.
//
// Parse reports every problem it can find, each with its line and column, in
// an *Error; it returns a nil policy whenever it returns an error.
func Parse(data []byte) (*Policy, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	fp := &fileParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), b: newBuilder()}
	if err := fp.parse(); err != nil {
		fp.errs = append(fp.errs, err)
	}
	if err := problems(fp.errs); err != nil {
		return nil, err
	}
	return fp.b.policy(), nil
}

// fileParser walks the JSON with a token decoder rather than unmarshalling
// into a struct, to know where each element starts (for line numbers) and to
// catch what encoding/json lets through: case-insensitive and repeated keys.
type fileParser struct {
	data  []byte
	dec   *json.Decoder
	b     *builder
	errs  []error
	lines []int // offsets of '\n', built on first use
}

// parse returns a fatal error (one that stops the walk); problems that still
// let it go on are appended to fp.errs.
func (fp *fileParser) parse() error {
	if len(bytes.TrimSpace(fp.data)) == 0 {
		return fp.fileError(0, errors.New(`the file is empty; an empty policy is {"allowed_hosts": []}`))
	}
	// The streaming decoder's error offsets can be several bytes early, so
	// the syntax is checked whole first: json.Unmarshal's offsets are exact,
	// and the walk below then cannot fail half-way.
	if err := json.Unmarshal(fp.data, new(json.RawMessage)); err != nil {
		return fp.syntaxError(err)
	}
	start := fp.skip(0)
	tok, err := fp.dec.Token()
	if err != nil {
		return fp.syntaxError(err)
	}
	if tok != json.Delim('{') {
		msg := `the file must hold a JSON object: {"allowed_hosts": [...]}`
		if tok == json.Delim('[') {
			msg = `the file must hold a JSON object, not a bare list: wrap it as {"allowed_hosts": [...]}`
		}
		return fp.fileError(start, errors.New(msg))
	}
	seen, seenHidden, seenDocker := false, false, false
	seenLocal := map[string]bool{}
	for fp.dec.More() {
		keyAt := fp.skip(fp.dec.InputOffset())
		tok, err := fp.dec.Token()
		if err != nil {
			return fp.syntaxError(err)
		}
		key, _ := tok.(string)
		switch {
		case key == "allowed_hosts" && !seen:
			seen = true
			if err := fp.hosts(); err != nil {
				return err
			}
			continue
		case key == "allowed_hosts":
			fp.errs = append(fp.errs, fp.fileError(keyAt, errors.New(`"allowed_hosts" appears twice`)))
		case key == "hidden_paths" && !seenHidden:
			seenHidden = true
			if err := fp.hiddenPaths(); err != nil {
				return err
			}
			continue
		case key == "hidden_paths":
			fp.errs = append(fp.errs, fp.fileError(keyAt, errors.New(`"hidden_paths" appears twice`)))
		case key == "docker" && !seenDocker:
			seenDocker = true
			raw, at, err := fp.value()
			if err != nil {
				return err
			}
			if raw[0] != 't' && raw[0] != 'f' {
				fp.errs = append(fp.errs, fp.fileError(at, fmt.Errorf(`"docker" must be true or false, not %s`, jsonKind(raw))))
			}
			fp.b.docker = raw[0] == 't'
			continue
		case key == "docker":
			fp.errs = append(fp.errs, fp.fileError(keyAt, errors.New(`"docker" appears twice`)))
		case localKeys[key] && !seenLocal[key]:
			seenLocal[key] = true
			raw, at, err := fp.value()
			if err != nil {
				return err
			}
			if err := fp.local(key, raw); err != nil {
				fp.errs = append(fp.errs, fp.fileError(at, err))
			}
			continue
		case localKeys[key]:
			fp.errs = append(fp.errs, fp.fileError(keyAt, fmt.Errorf("%q appears twice", key)))
		default:
			fp.errs = append(fp.errs, fp.fileError(keyAt, fmt.Errorf(`unknown key %q: the keys are "allowed_hosts", "hidden_paths", "unix_sockets", "loopback", "loopback_ports" and "docker"`, key)))
		}
		if _, _, err := fp.value(); err != nil {
			return err
		}
	}
	if _, err := fp.dec.Token(); err != nil {
		return fp.syntaxError(err)
	}
	return nil
}

// localKeys are the top-level keys of the Local part of a policy.
var localKeys = map[string]bool{"unix_sockets": true, "loopback": true, "loopback_ports": true}

// local reads one of localKeys into the builder's Local part.
func (fp *fileParser) local(key string, raw json.RawMessage) error {
	if raw[0] == 'n' {
		return nil
	}
	l := fp.b.local
	switch key {
	case "unix_sockets":
		var list []string
		if raw[0] != '[' || json.Unmarshal(raw, &list) != nil {
			return fmt.Errorf(`"unix_sockets" must be a list of socket paths, not %s`, jsonKind(raw))
		}
		var errs []error
		for i, u := range list {
			c, err := ParseUnixSocket(u)
			if err != nil {
				errs = append(errs, fmt.Errorf("unix_sockets[%d]: %w", i, err))
				continue
			}
			l.UnixSockets = append(l.UnixSockets, c)
		}
		if len(list) > MaxUnixSockets {
			errs = append(errs, fmt.Errorf("unix_sockets: %d entries; at most %d", len(list), MaxUnixSockets))
		}
		if err := errors.Join(errs...); err != nil {
			return err
		}
	case "loopback":
		var m string
		if raw[0] != '"' || json.Unmarshal(raw, &m) != nil {
			return fmt.Errorf(`"loopback" must be "all" or "session", not %s`, jsonKind(raw))
		}
		mode, err := ParseLoopbackMode(m)
		if err != nil {
			return err
		}
		l.Loopback = mode
	case "loopback_ports":
		var ports []int
		if raw[0] != '[' || json.Unmarshal(raw, &ports) != nil {
			return fmt.Errorf(`"loopback_ports" must be a list of port numbers, not %s`, jsonKind(raw))
		}
		for _, p := range ports {
			if p < 1 || p > 65535 {
				return fmt.Errorf("loopback_ports: %d is not a port (1-65535)", p)
			}
			l.LoopbackPorts = append(l.LoopbackPorts, uint16(p))
		}
	}
	fp.b.local = l
	return nil
}

// value reads the next JSON value whole, with the offset where it starts.
func (fp *fileParser) value() (json.RawMessage, int, error) {
	at := fp.skip(fp.dec.InputOffset())
	var raw json.RawMessage
	if err := fp.dec.Decode(&raw); err != nil {
		return nil, at, fp.syntaxError(err)
	}
	return raw, at, nil
}

// hosts reads the value of allowed_hosts. Its JSON syntax is checked whole
// first, so the walk over its elements cannot fail half-way.
func (fp *fileParser) hosts() error {
	raw, at, err := fp.value()
	if err != nil {
		return err
	}
	switch raw[0] {
	case 'n': // null: same as a missing key
		return nil
	case '[':
	default:
		fp.errs = append(fp.errs, fp.fileError(at, fmt.Errorf(`"allowed_hosts" must be a list of entries, not %s`, jsonKind(raw))))
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return fp.fileError(at, err)
	}
	for i := 0; dec.More(); i++ {
		elAt := at + skipJSONSpace(raw, int(dec.InputOffset()))
		var el json.RawMessage
		if err := dec.Decode(&el); err != nil {
			return fp.fileError(elAt, err)
		}
		fp.element(i, elAt, el)
	}
	return nil
}

// element adds one allowed_hosts element, or records why it is invalid.
func (fp *fileParser) element(i, at int, el json.RawMessage) {
	var (
		text string
		g    grant
		err  error
	)
	switch el[0] {
	case '"':
		err = json.Unmarshal(el, &text)
	case '{':
		var o object
		o, err = parseObject(el)
		text, g = o.host, grant{owner: o.owner, private: o.private, ports: o.ports, verify: o.verify}
		if !o.hasHost {
			text = truncate(string(el), 60)
		}
	default:
		text = truncate(string(el), 60)
		err = fmt.Errorf(`an entry must be a string or an object with a "host" key, not %s`, jsonKind(el))
	}
	var t target
	if err == nil {
		t, err = parseTarget(text)
	}
	if err == nil {
		err = checkGrantOptions(t, g.private)
	}
	if err == nil {
		err = checkVerify(t, g.verify)
	}
	if err != nil {
		line, col := fp.position(at)
		fp.errs = append(fp.errs, &EntryError{Index: i, Line: line, Column: col, Entry: text, Err: err})
		return
	}
	fp.b.add(t, g)
}

// object is an element in the rich form.
type object struct {
	host    string
	hasHost bool
	owner   string
	private bool
	ports   *Ports
	verify  Verify
}

// parseObject reads {"host": ..., "owner": ..., "allow_private": ...}. It
// returns what it could read even with an error, so the error can name the
// host.
func parseObject(el json.RawMessage) (object, error) {
	var o object
	var firstErr error
	fail := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(el))
	if _, err := dec.Token(); err != nil {
		return o, err
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return o, err
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return o, err
		}
		if seen[key] {
			fail(fmt.Errorf("key %q appears twice", key))
			continue
		}
		seen[key] = true
		switch key {
		case "host":
			if v[0] != '"' {
				fail(fmt.Errorf(`"host" must be a string, not %s`, jsonKind(v)))
				continue
			}
			o.hasHost = json.Unmarshal(v, &o.host) == nil
		case "owner":
			if v[0] != '"' {
				fail(fmt.Errorf(`"owner" must be a string, not %s`, jsonKind(v)))
				continue
			}
			if err := json.Unmarshal(v, &o.owner); err != nil {
				fail(err)
				continue
			}
			if err := checkOwner(o.owner); err != nil {
				fail(err)
			}
		case "allow_private":
			if err := json.Unmarshal(v, &o.private); err != nil || v[0] == 'n' {
				fail(fmt.Errorf(`"allow_private" must be true or false, not %s`, jsonKind(v)))
			}
		case "ports":
			p, err := ParsePorts(v)
			if err != nil {
				fail(err)
				continue
			}
			o.ports = p
		case "verify":
			var s string
			if v[0] != '"' || json.Unmarshal(v, &s) != nil {
				fail(fmt.Errorf(`"verify" must be "name" or "address", not %s`, jsonKind(v)))
				continue
			}
			vm, err := ParseVerify(s)
			if err != nil {
				fail(err)
				continue
			}
			o.verify = vm
		default:
			fail(fmt.Errorf(`unknown key %q: an entry object has "host", "owner", "allow_private", "ports" and "verify"`, key))
		}
	}
	if firstErr == nil && !o.hasHost {
		firstErr = errors.New(`the object has no "host"`)
	}
	return o, firstErr
}

// jsonKind names the type of a JSON value for messages.
func jsonKind(v json.RawMessage) string {
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// syntaxError turns a decoder error into a *FileError at the right place.
func (fp *fileParser) syntaxError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read, the offending one included.
		return fp.fileError(int(se.Offset)-1, fmt.Errorf("invalid JSON: %w", err))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fp.fileError(len(fp.data), errors.New("invalid JSON: unexpected end of file"))
	}
	return fp.fileError(int(fp.dec.InputOffset()), fmt.Errorf("invalid JSON: %w", err))
}

func (fp *fileParser) fileError(at int, err error) *FileError {
	line, col := fp.position(at)
	return &FileError{Line: line, Column: col, Err: err}
}

// skip returns the offset of the next token at or after off: the decoder's
// offset points just past the previous token, before separators.
func (fp *fileParser) skip(off int64) int { return skipJSONSpace(fp.data, int(off)) }

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\r', '\n', ',', ':':
			i++
		default:
			return i
		}
	}
	return i
}

// position converts a byte offset into a 1-based line and a 1-based column
// counted in characters, as editors show them.
func (fp *fileParser) position(off int) (line, col int) {
	off = max(0, min(off, len(fp.data)))
	if fp.lines == nil {
		fp.lines = []int{}
		for i, c := range fp.data {
			if c == '\n' {
				fp.lines = append(fp.lines, i)
			}
		}
	}
	n := sort.SearchInts(fp.lines, off) // newlines before off
	start := 0
	if n > 0 {
		start = fp.lines[n-1] + 1
	}
	return n + 1, utf8.RuneCount(fp.data[start:off]) + 1
}
