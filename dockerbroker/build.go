// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	gopath "path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Judging a build (POST /build) for the legacy builder, platform-free.
//
// A build's RUN steps run in containers the engine makes itself; they
// are confined by the cgroup parent the broker forces (cgroupparent).
// What the engine does itself, outside any container, is judged here
// before the request is forwarded:
//
//   - it pulls every FROM image and every COPY --from=<image> image from
//     its registry: JudgeDockerfile lists them (BuildPlan.Images) with the
//     registry host, for the caller to judge like a pull;
//   - it fetches ADD <http(s) URL> sources: listed (BuildPlan.URLs) with
//     their host; git sources are refused;
//   - it fetches the whole context when the query says remote=: refused;
//   - right after a FROM it runs the base image's ONBUILD triggers, which
//     are ADD and COPY --from like any other: JudgeOnBuild judges them
//     from the image's config once the caller has the image, and the
//     Dockerfile's own ONBUILD lines (run when a later stage starts FROM
//     their stage) are judged by JudgeDockerfile.
//
// The judge and the engine must read the same build: the same query
// (JudgeBuildQuery returns the one to forward; the caller forwards its
// Encode(), never the client's raw query), no query smuggled in the body
// (JudgeBuildHeader: the engine reads form-encoded bodies as parameters),
// the same Dockerfile out of the same context bytes (ReadBuildContext
// refuses every tar in which extraction could put other bytes at the
// Dockerfile's path than the entry the judge read), and the same
// instructions out of the Dockerfile (parseDockerfile follows the
// engine's parser, and refuses the forms that engine versions read
// differently instead of guessing which one runs).
//
// Values the engine computes are not guessed either: a FROM, COPY --from
// or ADD source with a variable ($) is refused, and so are quotes and
// escape characters in them (the engine's word processing would remove
// them: ADD "http://x" fetches http://x).
//
// The query's networkmode, isolation and cgroupparent are judged as a
// container's create; extrahosts, ulimits, the resources and the build
// arguments pass (they change the steps' containers, which are confined,
// not what the engine fetches).
//
// What the plan does not cover, for the caller: the engine follows an ADD
// URL's redirects itself (the caller sends the Dockerfile's through its
// fetch proxy, and refuses a trigger's), and it pulls a
// FROM image again when it is missing or pull=1 is asked, so the triggers
// the caller judged must be those of the image the engine builds from
// (pre-pull, then forward with no other pull of that name in between).

// MaxDockerfileSize bounds the Dockerfile ReadBuildContext returns.
const MaxDockerfileSize = 1 << 20

// BuildImage is an image the engine may pull during a build.
type BuildImage struct {
	// Ref is the reference as the Dockerfile writes it.
	Ref string
	// Host is the registry host the engine contacts (RegistryHost,
	// lower-cased; with a port when the reference has one).
	Host string
	// Base is set for a FROM image: the engine runs its ONBUILD
	// triggers, which the caller judges with JudgeOnBuild. A COPY
	// --from image's triggers do not run.
	Base bool
	// Platform is a FROM's --platform: the engine pulls that platform's
	// variant even of an image it has for another.
	Platform string
}

// BuildURL is a URL the engine fetches during a build (an ADD source).
type BuildURL struct {
	URL  string
	Host string // lower-cased, without the port
	Port string // the URL's, or its scheme's (80, 443)
	// Trigger is set for an ONBUILD trigger's URL, which the engine
	// reads from an image: the broker cannot send it through its fetch
	// proxy (addproxy.go).
	Trigger bool
}

// BuildPlan is what the engine would fetch for a build: each image and
// URL once, in the order the build first needs it.
type BuildPlan struct {
	Images []BuildImage
	URLs   []BuildURL
}

// Merge adds o's images and URLs that p does not have, after p's; an
// image that is a base in either is a base.
func (p *BuildPlan) Merge(o *BuildPlan) {
	if o == nil {
		return
	}
	for _, img := range o.Images {
		p.addImage(img)
	}
	for _, u := range o.URLs {
		p.addURL(u)
	}
}

func (p *BuildPlan) addImage(img BuildImage) {
	for i := range p.Images {
		if p.Images[i].Ref == img.Ref {
			p.Images[i].Base = p.Images[i].Base || img.Base
			return
		}
	}
	p.Images = append(p.Images, img)
}

func (p *BuildPlan) addURL(u BuildURL) {
	if !slices.Contains(p.URLs, u) {
		p.URLs = append(p.URLs, u)
	}
}

// buildQueryKeys are the query parameters of moby's POST /build (its
// newImageBuildOptions), each true when the engine reads every value
// (r.Form[key]) rather than the first. A key not here is refused: a
// parameter a later engine adds is not passed unjudged.
var buildQueryKeys = map[string]bool{
	"t": true, "extrahosts": true, "securityopt": true,
	"dockerfile": false, "q": false, "nocache": false, "rm": false, "forcerm": false, "pull": false,
	"memory": false, "memswap": false, "cpushares": false, "cpusetcpus": false, "cpusetmems": false,
	"cpuperiod": false, "cpuquota": false, "shmsize": false, "ulimits": false, "squash": false,
	"buildargs": false, "labels": false, "cachefrom": false, "networkmode": false, "platform": false,
	"target": false, "isolation": false, "cgroupparent": false, "remote": false, "version": false,
	"outputs": false, "session": false, "buildid": false,
}

// JudgeBuildHeader judges a build request's headers. The engine reads
// its parameters with net/http's FormValue, which takes them from a body
// sent as application/x-www-form-urlencoded or multipart/form-data too
// (ahead of the query's): such a body could say remote= where the judge
// reads the query. So only the media types a build context is sent as
// pass, and one Content-Type at most.
func JudgeBuildHeader(h http.Header) *Refusal {
	const what = "build"
	cts := h.Values("Content-Type")
	if len(cts) > 1 {
		return refuse(what, "more than one Content-Type header")
	}
	if len(cts) == 0 || cts[0] == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(cts[0])
	if err != nil {
		return refuse(what, "the Content-Type %q: %v", shorten(cts[0]), err)
	}
	switch mt {
	case "application/x-tar", "application/tar", "application/octet-stream", "application/gzip",
		"application/x-gzip", "application/x-bzip2":
		return nil
	}
	return refuse(what, "the Content-Type %s: the body is the build context (a tar), and the engine would read a form body as parameters", mt)
}

// JudgeBuildQuery judges a POST /build query against s and returns the
// query to forward: the same parameters with cgroupparent set to
// buildParent, where the RUN steps' containers are confined.
//
// A client's own cgroupparent is refused unless it is buildParent
// (rather than silently replaced): as --cgroup-parent on a create, the
// client asked for a placement sluice does not give, and says so.
func JudgeBuildQuery(q url.Values, s Scope, buildParent string) (url.Values, *Refusal) {
	const what = "build"
	if buildParent == "" {
		return nil, refuse(what, "no cgroup parent for its steps (the broker has none configured)")
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		multi, ok := buildQueryKeys[k]
		if !ok {
			return nil, refuse(what, "the query parameter %q: not one of the legacy builder's the broker judges", shorten(k))
		}
		if !multi && len(q[k]) > 1 {
			return nil, refuse(what, "the query parameter %s given %d times: the engine reads only the first", k, len(q[k]))
		}
	}
	if v := q.Get("remote"); v != "" {
		return nil, refuse(what, "remote=%s: the engine would fetch the build context itself, unjudged; send the context from the session", shorten(v))
	}
	switch v := q.Get("version"); v {
	case "", "1":
	case "2":
		return nil, refuse(what, "BuildKit (version=2): its steps do not run under the session; build with the legacy builder (DOCKER_BUILDKIT=0, no buildx)")
	default:
		return nil, refuse(what, "version=%s: only the legacy builder (1)", shorten(v))
	}
	for _, k := range []string{"session", "outputs"} {
		if v := q.Get(k); v != "" {
			return nil, refuse(what, "%s=%s: a BuildKit parameter; build with the legacy builder (DOCKER_BUILDKIT=0, no buildx)", k, shorten(v))
		}
	}
	if _, ok := q["securityopt"]; ok {
		return nil, refuse(what, "securityopt: security options of build steps are not judged")
	}
	switch m := q.Get("networkmode"); {
	case isDefaultNet(m):
	case m == "host":
		return nil, refuse(what, "--network host: the build steps would use the machine's network, outside the session")
	case strings.HasPrefix(m, "container:"):
		if s.Owns == nil || !s.Owns(strings.TrimPrefix(m, "container:")) {
			return nil, refuse(what, "--network %s: not a container of this session", shorten(m))
		}
	default:
		if s.OwnsNetwork == nil || !s.OwnsNetwork(m) {
			return nil, refuse(what, "--network %s: only the default network, none and the session's own networks", shorten(m))
		}
	}
	if i := q.Get("isolation"); i != "" && !strings.EqualFold(i, "default") {
		return nil, refuse(what, "--isolation %s: only the default", shorten(i))
	}
	if c := q.Get("cgroupparent"); c != "" && c != buildParent {
		return nil, refuse(what, "--cgroup-parent %s: sluice places the build's steps itself", shorten(c))
	}
	if l := q.Get("labels"); l != "" {
		var labels map[string]string
		if err := json.Unmarshal([]byte(l), &labels); err != nil {
			return nil, refuse(what, "labels: not JSON the broker can read: %v", err)
		}
		for k := range labels {
			if strings.HasPrefix(k, LabelPrefix) {
				return nil, refuse(what, "the label %s: labels starting with %q are sluice's own", k, LabelPrefix)
			}
		}
	}
	if _, _, err := dockerfileName(q.Get("dockerfile")); err != nil {
		return nil, refuse(what, "%v", err)
	}
	out := url.Values{}
	for k, vs := range q {
		out[k] = slices.Clone(vs)
	}
	out.Set("cgroupparent", buildParent)
	return out, nil
}

// dockerfileName is the context path of the Dockerfile the dockerfile
// parameter names, and whether the engine falls back to "dockerfile"
// when it is missing (only for the name Dockerfile as given or
// defaulted, as moby's withDockerfileFromContext). A path with ".." is
// refused even when it stays inside: the engine resolves it after the
// symbolic links before it, the judge could only clean it lexically.
func dockerfileName(param string) (string, bool, error) {
	if param == "" || param == "Dockerfile" {
		return "Dockerfile", true, nil
	}
	if strings.HasPrefix(param, "/") {
		return "", false, fmt.Errorf("the Dockerfile path %s: absolute; name it within the context", shorten(param))
	}
	if slices.Contains(strings.Split(param, "/"), "..") {
		return "", false, fmt.Errorf("the Dockerfile path %s: a path with .. is not judged", shorten(param))
	}
	c := gopath.Clean(param)
	if c == "." {
		return "", false, fmt.Errorf("the Dockerfile path %s: not a file", shorten(param))
	}
	return c, false, nil
}

// Compression magic numbers, as moby's archive.DetectCompression checks
// them (in its order: bzip2, gzip, xz, zstd).
var (
	bzip2Magic = []byte{0x42, 0x5a, 0x68}
	gzipMagic  = []byte{0x1f, 0x8b, 0x08}
	xzMagic    = []byte{0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00}
	zstdMagic  = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// contextTar opens a build context as the engine does: compressed or not
// by its first bytes.
func contextTar(r io.Reader) (*tar.Reader, error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(10)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading the build context: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, bzip2Magic):
		return tar.NewReader(bzip2.NewReader(br)), nil
	case bytes.HasPrefix(head, gzipMagic):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading the build context: %w", err)
		}
		return tar.NewReader(gz), nil
	case bytes.HasPrefix(head, xzMagic):
		return nil, errors.New("the build context is xz-compressed, which the broker does not read; send it as a plain or gzip-compressed tar")
	case bytes.HasPrefix(head, zstdMagic) || len(head) >= 8 && binary.LittleEndian.Uint32(head)&0xfffffff0 == 0x184d2a50:
		return nil, errors.New("the build context is zstd-compressed, which the broker does not read; send it as a plain or gzip-compressed tar")
	}
	return tar.NewReader(br), nil
}

// cleanEntry is a tar entry's path as the engine extracts it: cleaned,
// relative to the context's root ("" for the root itself).
func cleanEntry(name string) string {
	return strings.TrimPrefix(gopath.Clean("/"+name), "/")
}

// ReadBuildContext returns the bytes of the Dockerfile a build context
// (a tar, plain or compressed with gzip or bzip2) holds at the path the
// dockerfile parameter names ("" for Dockerfile, falling back to
// dockerfile as the engine does). The caller spools the body, reads it
// with the forwarded query's dockerfile, and forwards the same bytes.
// xz and zstd contexts, which the engine reads with external tools, are
// refused. It reads the whole context, and refuses
// every one in which the engine, extracting it, could read other bytes
// at that path than the entry returned:
//
//   - the Dockerfile's entry is a symbolic or hard link (the engine
//     follows it);
//   - two entries name the path, or names equal to it without regard to
//     case (the engine keeps the last; on a file system without case,
//     Dockerfile and dockerfile are one file);
//   - an entry lies under a link entry ("sub" a link to ".", then
//     "sub/Dockerfile": the engine writes through the link, over the
//     Dockerfile the judge read), the link's name compared without
//     regard to case; a client's tar never has one (it stores a linked
//     directory as the link);
//   - the Dockerfile is larger than MaxDockerfileSize.
func ReadBuildContext(r io.Reader, dockerfile string) ([]byte, error) {
	name, fallback, err := dockerfileName(dockerfile)
	if err != nil {
		return nil, err
	}
	tr, err := contextTar(r)
	if err != nil {
		return nil, err
	}
	type candidate struct {
		name    string
		typ     byte
		regular bool
		data    []byte
		tooBig  bool
	}
	var found []candidate
	var names []string
	links := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the build context: %w", err)
		}
		n := cleanEntry(hdr.Name)
		if n == "" {
			continue
		}
		names = append(names, n)
		link := hdr.Typeflag == tar.TypeSymlink || hdr.Typeflag == tar.TypeLink
		if link {
			links[strings.ToLower(n)] = n
		}
		if !strings.EqualFold(n, name) {
			continue
		}
		c := candidate{name: n, typ: hdr.Typeflag}
		if !link && hdr.FileInfo().Mode().IsRegular() {
			c.regular = true
			c.data, err = io.ReadAll(io.LimitReader(tr, MaxDockerfileSize+1))
			if err != nil {
				return nil, fmt.Errorf("reading the build context: %w", err)
			}
			c.tooBig = len(c.data) > MaxDockerfileSize
		}
		found = append(found, c)
	}
	for _, n := range names {
		for d := gopath.Dir(n); d != "."; d = gopath.Dir(d) {
			if l, ok := links[strings.ToLower(d)]; ok {
				return nil, fmt.Errorf("the build context's entry %s lies under the link %s: the engine would write it through the link", shorten(n), shorten(l))
			}
		}
	}
	switch {
	case len(found) == 0:
		return nil, fmt.Errorf("no %s in the build context", name)
	case len(found) > 1:
		return nil, fmt.Errorf("the build context holds %s more than once (%s and %s; names differing only in case count): the engine would read another than the judge", name, shorten(found[0].name), shorten(found[1].name))
	}
	c := found[0]
	if c.name != name && (!fallback || c.name != "dockerfile") {
		return nil, fmt.Errorf("no %s in the build context (only %s)", name, shorten(c.name))
	}
	switch {
	case c.typ == tar.TypeSymlink:
		return nil, fmt.Errorf("the build context's %s is a symbolic link, which the engine would follow", c.name)
	case c.typ == tar.TypeLink:
		return nil, fmt.Errorf("the build context's %s is a hard link, which the engine would follow", c.name)
	case !c.regular:
		return nil, fmt.Errorf("the build context's %s is not a regular file", c.name)
	case c.tooBig:
		return nil, fmt.Errorf("the build context's %s is larger than %d bytes", c.name, MaxDockerfileSize)
	}
	return c.data, nil
}

// The Dockerfile, read as the engine's parser (moby/buildkit's
// frontend/dockerfile/parser, which the legacy builder uses) reads it:
//
//   - lines end at \n, with any \r before it dropped; a byte-order mark
//     opens the first line;
//   - a line whose first non-space character is # is a comment, also
//     inside a continued instruction;
//   - a line ending with the escape character (then spaces or tabs)
//     continues on the next; empty lines inside are skipped;
//   - the instruction is its first word, case-insensitive; flags
//     (--name=value, quotes and backslashes processed) follow it.
//
// Where engine versions differ the judge refuses rather than picks one:
// an escape directive is honoured only as the first line (older parsers
// stopped looking for directives at the first other line, newer ones
// read syntax= and a #! line before it), a line ending with two escape
// characters is refused (older parsers continued it, newer ones do not),
// a comment inside a continued FROM, ADD, COPY or ONBUILD is refused
// (older parsers kept indented ones as text), and heredocs (<<EOF) are
// refused in RUN, ADD, COPY and ONBUILD (newer parsers take the lines
// after as the heredoc's body, older ones as instructions: a stage name
// the judge saw might not exist for the engine).
var (
	dfWhitespace    = regexp.MustCompile(`[\t\v\f\r ]+`)
	dfEscapeAny     = regexp.MustCompile(`(?i)^#\s*escape\s*=`)
	dfEscape        = regexp.MustCompile("^#[ \t]*escape[ \t]*=[ \t]*([\\\\`])[ \t]*$")
	dfOnbuildPrefix = regexp.MustCompile(`(?i)^\s*ONBUILD\s+`)
	dfStageName     = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	dfImageRef      = regexp.MustCompile(`^[A-Za-z0-9._:/@-]+$`)
	dfHeredoc       = regexp.MustCompile(`^[0-9]*<<[^<]`)
)

// maxDockerfileLine is the engine's longest line (bufio.Scanner's token).
const maxDockerfileLine = 64<<10 - 1

// dfKnown are the instructions the legacy builder runs; it refuses any
// other, and so does the judge.
var dfKnown = map[string]bool{"from": true, "run": true, "cmd": true, "label": true, "maintainer": true,
	"expose": true, "env": true, "add": true, "copy": true, "entrypoint": true, "volume": true, "user": true,
	"workdir": true, "arg": true, "onbuild": true, "stopsignal": true, "healthcheck": true, "shell": true}

// dfInstruction is one instruction of a Dockerfile.
type dfInstruction struct {
	line     int      // the line it starts on
	cmd      string   // lower-cased
	flags    []string // "--name=value" as the engine's flag reader gives them
	args     string   // after the flags, trimmed
	original string   // its lines joined, continuations removed
	comment  bool     // a comment line was skipped inside it
}

// parseDockerfile splits a Dockerfile (or an ONBUILD trigger, which the
// engine parses as one) into instructions.
func parseDockerfile(text []byte) ([]dfInstruction, error) {
	s := string(text)
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if len(l) > maxDockerfileLine {
			return nil, fmt.Errorf("line %d is longer than %d bytes", i+1, maxDockerfileLine)
		}
		lines[i] = strings.TrimRight(l, "\r\n")
	}
	if len(lines) > 0 {
		lines[0] = strings.TrimPrefix(lines[0], "\ufeff")
	}
	esc := `\`
	for i, l := range lines {
		t := strings.TrimLeftFunc(l, unicode.IsSpace)
		if !dfEscapeAny.MatchString(t) {
			continue
		}
		if i != 0 {
			return nil, fmt.Errorf("line %d: an escape directive below the first line (engines differ on whether it counts; put it first)", i+1)
		}
		m := dfEscape.FindStringSubmatch(t)
		if m == nil {
			return nil, errors.New("line 1: write the escape directive as # escape=\\ or # escape=`")
		}
		esc = m[1]
	}
	e := regexp.QuoteMeta(esc)
	cont := regexp.MustCompile(`([^` + e + `])` + e + `[ \t]*$|^` + e + `[ \t]*$`)
	double := regexp.MustCompile(e + e + `[ \t]*$`)
	trim := func(n int, l string) (string, bool, error) {
		if double.MatchString(l) {
			return "", false, fmt.Errorf("line %d ends with two escape characters (engines differ on whether it continues)", n)
		}
		if cont.MatchString(l) {
			return cont.ReplaceAllString(l, "$1"), false, nil
		}
		return l, true, nil
	}
	var out []dfInstruction
	for i := 0; i < len(lines); {
		start := i + 1
		first := strings.TrimLeftFunc(lines[i], unicode.IsSpace)
		i++
		if strings.HasPrefix(first, "#") {
			continue
		}
		line, end, err := trim(start, first)
		if err != nil {
			return nil, err
		}
		if end && line == "" {
			continue
		}
		comment := false
		for !end && i < len(lines) {
			l := lines[i]
			i++
			t := strings.TrimLeftFunc(l, unicode.IsSpace)
			if strings.HasPrefix(t, "#") {
				comment = true
				continue
			}
			if t == "" {
				continue
			}
			var c string
			if c, end, err = trim(i, l); err != nil {
				return nil, err
			}
			line += c
		}
		in, err := splitInstruction(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", start, err)
		}
		in.line, in.comment = start, comment
		out = append(out, in)
	}
	if len(out) == 0 {
		return nil, errors.New("no instructions")
	}
	return out, nil
}

// splitInstruction splits an instruction's joined line into its name,
// flags and arguments, as the engine's splitCommand.
func splitInstruction(line string) (dfInstruction, error) {
	parts := dfWhitespace.Split(strings.TrimSpace(line), 2)
	in := dfInstruction{cmd: strings.ToLower(parts[0]), original: line}
	if len(parts) == 2 {
		in.args, in.flags = builderFlags(parts[1])
	}
	in.args = strings.TrimSpace(in.args)
	if in.cmd == "" {
		return in, errors.New("an empty instruction")
	}
	return in, nil
}

// builderFlags reads the flags (words starting with --) at the start of
// an instruction's arguments, with the engine's rules: a flag word ends
// at a space outside quotes, quotes are removed, a backslash takes the
// next byte as it is (whatever the escape character), a lone -- ends the
// flags. It reads bytes, as the engine does, so a byte of a multi-byte
// character is taken as the rune of that value.
func builderFlags(line string) (rest string, words []string) {
	const (
		inSpaces = iota
		inWord
		inQuote
	)
	phase, word, blankOK := inSpaces, "", false
	var quote byte
	for pos := 0; pos <= len(line); pos++ {
		var ch byte
		if pos != len(line) {
			ch = line[pos]
		}
		if phase == inSpaces {
			if pos == len(line) {
				break
			}
			if unicode.IsSpace(rune(ch)) {
				continue
			}
			if ch != '-' || pos+1 == len(line) || line[pos+1] != '-' {
				return line[pos:], words
			}
			phase = inWord
		}
		if pos == len(line) {
			if word != "--" && (blankOK || word != "") {
				words = append(words, word)
			}
			break
		}
		switch phase {
		case inWord:
			if unicode.IsSpace(rune(ch)) {
				phase = inSpaces
				if word == "--" {
					return line[pos:], words
				}
				if blankOK || word != "" {
					words = append(words, word)
				}
				word, blankOK = "", false
				continue
			}
			if ch == '\'' || ch == '"' {
				quote, blankOK, phase = ch, true, inQuote
				continue
			}
			if ch == '\\' {
				if pos+1 == len(line) {
					continue
				}
				pos++
				ch = line[pos]
			}
			word += string(rune(ch))
		case inQuote:
			if ch == quote {
				phase = inWord
				continue
			}
			if ch == '\\' {
				if pos+1 == len(line) {
					phase = inWord
					continue
				}
				pos++
				ch = line[pos]
			}
			word += string(rune(ch))
		}
	}
	return "", words
}

// dfFlags reads an instruction's flags against the ones it may have:
// name → takes a value. The engine refuses unknown flags, a repeated
// one and a string flag without a value; so does the judge.
func dfFlags(in dfInstruction, allowed map[string]bool) (map[string]string, error) {
	out := map[string]string{}
	for _, w := range in.flags {
		n, v, hasValue := strings.Cut(strings.TrimPrefix(w, "--"), "=")
		takesValue, ok := allowed[n]
		if !ok {
			return nil, fmt.Errorf("the flag --%s of %s: not one the broker judges", shorten(n), strings.ToUpper(in.cmd))
		}
		if _, seen := out[n]; seen && n != "exclude" {
			return nil, fmt.Errorf("the flag --%s given twice", n)
		}
		if takesValue && !hasValue {
			return nil, fmt.Errorf("the flag --%s without a value", n)
		}
		out[n] = v
	}
	return out, nil
}

var (
	fromFlags = map[string]bool{"platform": true}
	addFlags  = map[string]bool{"chown": true, "chmod": true, "checksum": true, "link": false, "keep-git-dir": false, "exclude": true, "unpack": false}
	copyFlags = map[string]bool{"from": true, "chown": true, "chmod": true, "link": false, "parents": false, "exclude": true}
)

// dfList reads ADD's and COPY's arguments as the engine does: a JSON
// array of strings when they start with [ and decode as one, else words
// split at spaces. Text after the array, which the engine ignores, is
// refused.
func dfList(args string) ([]string, error) {
	t := strings.TrimLeftFunc(args, unicode.IsSpace)
	if strings.HasPrefix(t, "[") {
		d := json.NewDecoder(strings.NewReader(t))
		var v []any
		if err := d.Decode(&v); err == nil {
			out := make([]string, 0, len(v))
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, errors.New("a JSON array that is not of strings")
				}
				out = append(out, s)
			}
			if strings.TrimSpace(t[d.InputOffset():]) != "" {
				return nil, errors.New("text after the JSON array")
			}
			return out, nil
		}
	}
	if args == "" {
		return nil, nil
	}
	return dfWhitespace.Split(args, -1), nil
}

// JudgeDockerfile reads a Dockerfile as the legacy builder does and
// returns what the engine would fetch building it: the images of FROM
// (not scratch, not an earlier stage's name) and of COPY --from (not a
// stage's name or index), and ADD's URLs, also those of its ONBUILD
// lines. It refuses what it cannot judge: values with variables, quotes
// or escapes where they name what is fetched, git sources, heredocs,
// flags RUN takes only under BuildKit, unknown instructions, and every
// form engine versions parse differently (parseDockerfile).
//
// Build arguments are not taken: a value they could change (one with $)
// is refused, so none reaches what is judged.
func JudgeDockerfile(text []byte) (*BuildPlan, *Refusal) {
	const what = "build"
	list, err := parseDockerfile(text)
	if err != nil {
		return nil, refuse(what, "the Dockerfile: %v", err)
	}
	plan := &BuildPlan{}
	var stages dfStages // the stages before the current one
	current, inStage := "", false
	for _, in := range list {
		where := fmt.Sprintf("line %d: %s", in.line, strings.ToUpper(in.cmd))
		if !dfKnown[in.cmd] {
			return nil, refuse(what, "line %d: the instruction %s: not one the legacy builder runs", in.line, shorten(in.cmd))
		}
		if !inStage && in.cmd != "from" && in.cmd != "arg" {
			return nil, refuse(what, "%s before the first FROM", where)
		}
		if in.comment && (in.cmd == "from" || in.cmd == "add" || in.cmd == "copy" || in.cmd == "onbuild") {
			return nil, refuse(what, "%s: a comment inside the continued instruction (engines differ on which lines are comments); move it above", where)
		}
		if in.cmd != "from" {
			if r := judgeStep(where, in, stages, plan); r != nil {
				return nil, r
			}
			continue
		}
		if inStage {
			stages.n++
			if current != "" {
				stages.names = append(stages.names, current)
			}
		}
		inStage, current = true, ""
		flags, err := dfFlags(in, fromFlags)
		if err != nil {
			return nil, refuse(what, "%s: %v", where, err)
		}
		if strings.ContainsAny(flags["platform"], "$\\\"'") {
			return nil, refuse(what, "%s: --platform=%s: a value the engine would compute, which the broker cannot judge", where, shorten(flags["platform"]))
		}
		var args []string
		if in.args != "" {
			args = dfWhitespace.Split(in.args, -1)
		}
		switch {
		case len(args) == 3 && strings.EqualFold(args[1], "as"):
			current = strings.ToLower(args[2])
			if !dfStageName.MatchString(current) {
				return nil, refuse(what, "%s: the stage name %s: not a valid name", where, shorten(args[2]))
			}
			if stages.named(current) {
				return nil, refuse(what, "%s: the stage name %s is used twice", where, current)
			}
		case len(args) != 1:
			return nil, refuse(what, "%s: takes an image and, with AS, a stage name", where)
		}
		img := args[0]
		if img == "scratch" || stages.named(img) {
			continue
		}
		if r := judgeRef(where, img); r != nil {
			return nil, r
		}
		plan.addImage(BuildImage{Ref: img, Host: strings.ToLower(RegistryHost(img)), Base: true, Platform: flags["platform"]})
	}
	if !inStage {
		return nil, refuse(what, "the Dockerfile has no FROM")
	}
	return plan, nil
}

// JudgeOnBuild judges a base image's ONBUILD triggers (its config's
// OnBuild), which the engine parses afresh, each as a Dockerfile of its
// own, and runs right after the FROM that names the image. The plan it
// returns (the images of COPY --from, the URLs of ADD) is for the caller
// to merge into the build's (BuildPlan.Merge) and judge with it. A
// trigger's COPY --from names no stage for the judge: the build's stage
// it might mean is judged as the image of that name, which errs on the
// side of judging.
func JudgeOnBuild(triggers []string) (*BuildPlan, *Refusal) {
	plan := &BuildPlan{}
	if r := judgeTriggers("the base image's ONBUILD trigger", triggers, dfStages{}, plan); r != nil {
		return nil, r
	}
	return plan, nil
}

// judgeTriggers judges ONBUILD triggers, with stages those a COPY --from
// may mean, adding what they fetch to plan; context says whose triggers
// they are.
func judgeTriggers(context string, triggers []string, stages dfStages, plan *BuildPlan) *Refusal {
	const what = "build"
	for _, t := range triggers {
		where := fmt.Sprintf("%s %q", context, shorten(t))
		list, err := parseDockerfile([]byte(t))
		if err != nil {
			return refuse(what, "%s: %v", where, err)
		}
		for _, in := range list {
			where := where
			if dfKnown[in.cmd] {
				where += ": " + strings.ToUpper(in.cmd)
			}
			switch {
			case !dfKnown[in.cmd]:
				return refuse(what, "%s: the instruction %s: not one the legacy builder runs", where, shorten(in.cmd))
			case in.cmd == "from" || in.cmd == "onbuild" || in.cmd == "maintainer":
				return refuse(what, "%s: not a trigger the engine runs", where)
			case in.comment && (in.cmd == "add" || in.cmd == "copy"):
				return refuse(what, "%s: a comment inside the continued instruction (engines differ on which lines are comments)", where)
			}
			sub := &BuildPlan{}
			if r := judgeStep(where, in, stages, sub); r != nil {
				return r
			}
			for _, u := range sub.URLs {
				u.Trigger = true
				plan.addURL(u)
			}
			for _, img := range sub.Images {
				plan.addImage(img)
			}
		}
	}
	return nil
}

// judgeStep judges an instruction other than FROM, adding what it
// fetches to plan.
func judgeStep(where string, in dfInstruction, stages dfStages, plan *BuildPlan) *Refusal {
	const what = "build"
	switch in.cmd {
	case "run", "add", "copy", "onbuild":
		for _, w := range strings.Fields(in.original) {
			if dfHeredoc.MatchString(w) {
				return refuse(what, "%s: a heredoc (%s) is BuildKit's; the legacy builder does not read it, and engines differ on the lines it takes", where, shorten(w))
			}
		}
	}
	switch in.cmd {
	case "run":
		if len(in.flags) > 0 {
			return refuse(what, "%s %s: RUN's flags are BuildKit's; the legacy builder refuses them", where, shorten(in.flags[0]))
		}
	case "onbuild":
		if len(in.flags) > 0 {
			return refuse(what, "%s: the flag %s: ONBUILD takes none", where, shorten(in.flags[0]))
		}
		// The engine stores the line without its ONBUILD as the
		// trigger, and parses it afresh (default escape character)
		// when a later stage or build starts FROM this one's image.
		return judgeTriggers(where+": the trigger", []string{dfOnbuildPrefix.ReplaceAllString(in.original, "")}, stages, plan)
	case "copy":
		flags, err := dfFlags(in, copyFlags)
		if err != nil {
			return refuse(what, "%s: %v", where, err)
		}
		from, ok := flags["from"]
		if !ok || from == "" {
			return nil
		}
		if stages.named(from) || stages.indexed(from) {
			return nil
		}
		if r := judgeRef(where+" --from", from); r != nil {
			return r
		}
		plan.addImage(BuildImage{Ref: from, Host: strings.ToLower(RegistryHost(from))})
	case "add":
		if _, err := dfFlags(in, addFlags); err != nil {
			return refuse(what, "%s: %v", where, err)
		}
		list, err := dfList(in.args)
		if err != nil {
			return refuse(what, "%s: %v", where, err)
		}
		if len(list) < 2 {
			return refuse(what, "%s: takes sources and a destination", where)
		}
		for _, src := range list[:len(list)-1] {
			u, r := judgeAddSource(where, src)
			if r != nil {
				return r
			}
			if u != nil {
				plan.addURL(*u)
			}
		}
	}
	return nil
}

// dfStages are the stages of a build done before the current one, which
// FROM and COPY --from may name instead of an image.
type dfStages struct {
	names []string // lower-cased
	n     int
}

// named reports whether ref names one of the stages, without regard to
// case (the engine's stage lookup).
func (s dfStages) named(ref string) bool {
	for _, n := range s.names {
		if strings.EqualFold(n, ref) {
			return true
		}
	}
	return false
}

// indexed reports whether ref is the index of one of the stages (COPY
// --from=0). An index of no stage done is the engine's error, not a
// pull, in the engines read; it is judged as an image all the same, in
// case one pulls it.
func (s dfStages) indexed(ref string) bool {
	i, err := strconv.ParseInt(ref, 10, 0)
	return err == nil && i >= 0 && i < int64(s.n)
}

// judgeRef judges an image reference of FROM or COPY --from: written out,
// with none of the characters the engine's word processing would change.
func judgeRef(where, ref string) *Refusal {
	const what = "build"
	if strings.Contains(ref, "$") {
		return refuse(what, "%s %s: a variable (ARG, ENV, build argument) the broker cannot judge; write the image's name", where, shorten(ref))
	}
	if !dfImageRef.MatchString(ref) {
		return refuse(what, "%s %s: not a plain image reference (quotes, escapes and other characters are not judged)", where, shorten(ref))
	}
	return nil
}

// judgeAddSource judges one ADD source: a path in the context passes
// (nil, nil), a plain http(s) URL is returned to judge, and the rest is
// refused. A source is taken as a URL when, with every quote and escape
// character removed, it holds :// or starts git@: the engine removes
// some of them before it looks for http:// and https://, so nothing it
// would fetch passes as a path.
func judgeAddSource(where, src string) (*BuildURL, *Refusal) {
	const what = "build"
	if strings.Contains(src, "$") {
		return nil, refuse(what, "%s %s: a variable (ARG, ENV, build argument) the broker cannot judge; write the source, or use COPY, or RUN curl in the build step, which runs confined", where, shorten(src))
	}
	bare := strings.Map(func(r rune) rune {
		if r == '\'' || r == '"' || r == '\\' || r == '`' {
			return -1
		}
		return r
	}, src)
	low := strings.ToLower(bare)
	if !strings.Contains(low, "://") && !strings.HasPrefix(low, "git@") {
		return nil, nil
	}
	if bare != src {
		return nil, refuse(what, "%s %s: write the URL plainly, without quotes or escapes", where, shorten(src))
	}
	scheme, _, _ := strings.Cut(low, "://")
	if strings.HasPrefix(low, "git@") || scheme == "git" || strings.HasPrefix(scheme, "git+") {
		return nil, refuse(what, "%s %s: git sources are not judged; clone in a RUN step, which runs confined", where, shorten(src))
	}
	if s, _, _ := strings.Cut(src, "://"); s != "http" && s != "https" {
		return nil, refuse(what, "%s %s: only http and https URLs are judged", where, shorten(src))
	}
	for i := 0; i < len(src); i++ {
		if src[i] <= ' ' || src[i] >= 0x7f {
			return nil, refuse(what, "%s %s: a URL with spaces, control or non-ASCII characters is not judged", where, shorten(src))
		}
	}
	u, err := url.Parse(src)
	if err != nil || u.Hostname() == "" {
		return nil, refuse(what, "%s %s: not a URL the broker can read", where, shorten(src))
	}
	if strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), ".git") {
		return nil, refuse(what, "%s %s: git sources are not judged; clone in a RUN step, which runs confined", where, shorten(src))
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return &BuildURL{URL: src, Host: strings.ToLower(u.Hostname()), Port: port}, nil
}
