// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// An image pulled by digest through the pull proxy is known to the
// engine by the proxy's digest reference only: the engine records a
// digest reference for the name it pulled, and its API can add a tag
// but never a digest reference (POST /images/{id}/tag refuses one). The
// broker remembers what the session pulled by digest (the client's
// reference, normalized, to the image's id) and resolves those
// references itself where the session names an image to the engine: an
// inspect, a container's create, a build's FROM and COPY --from (the
// Dockerfile the engine gets names the image by its id). A reference is
// resolved only to the image its own pull through the proxy made, whose
// content the digest fixes.

// digestPattern is a digest as a reference carries it.
var digestPattern = regexp.MustCompile(`^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-fA-F0-9]{32,}$`)

// digestKey is the key of a digest reference in Broker.digests: the
// registry, the repository there and the digest, so that alpine@D,
// docker.io/library/alpine@D and registry-1.docker.io/library/alpine@D
// are one; ok is false for a reference without a digest.
func digestKey(ref string) (string, bool) {
	name, digest, ok := strings.Cut(ref, "@")
	if !ok || !digestPattern.MatchString(digest) || name == "" {
		return "", false
	}
	// A tag beside the digest: the engine pulls by the digest.
	if i, slash := strings.LastIndex(name, ":"), strings.LastIndex(name, "/"); i > slash {
		name = name[:i]
	}
	if first, rest, ok := strings.Cut(name, "/"); ok && (first == "docker.io" || first == "index.docker.io") {
		name = rest
	}
	host, repo := upstreamRepo(name)
	return host + "/" + repo + "@" + digest, true
}

// rememberDigest records that the session's pull of ref (a digest
// reference) made the image id.
func (b *Broker) rememberDigest(ref, id string) {
	k, ok := digestKey(ref)
	if !ok || id == "" {
		return
	}
	b.mu.Lock()
	b.digests[k] = id
	b.mu.Unlock()
}

// pulledDigest is the id of the image the session pulled by the digest
// reference ref through the proxy.
func (b *Broker) pulledDigest(ref string) (string, bool) {
	k, ok := digestKey(ref)
	if !ok {
		return "", false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	id, ok := b.digests[k]
	return id, ok
}

// createImage is a container create's body with an image the session
// pulled by digest named by its id; any other body as it came.
func (b *Broker) createImage(body []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("the create's body: %w", err)
	}
	key := ""
	for k := range m {
		// The engine reads JSON keys without regard to case.
		if strings.EqualFold(k, "Image") {
			if key != "" {
				return nil, errors.New("the create's body names its image twice")
			}
			key = k
		}
	}
	var image string
	if key == "" || json.Unmarshal(m[key], &image) != nil {
		return body, nil
	}
	id, ok := b.pulledDigest(image)
	if !ok {
		return body, nil
	}
	raw, err := json.Marshal(id)
	if err != nil {
		return nil, err
	}
	m[key] = raw
	return json.Marshal(m)
}

// rewriteDockerfile names each image of subst (a reference as the
// Dockerfile writes it, to an image id) by its id where FROM or
// COPY --from= names it; every other byte stays.
func rewriteDockerfile(text []byte, subst map[string]string) []byte {
	if len(subst) == 0 {
		return text
	}
	lines := bytes.SplitAfter(text, []byte("\n"))
	for i, line := range lines {
		word := strings.ToUpper(firstWord(string(line)))
		if word != "FROM" && word != "COPY" {
			continue
		}
		s := string(line)
		for ref, id := range subst {
			re := regexp.MustCompile(`(^|[ \t=])` + regexp.QuoteMeta(ref) + `([ \t\r\n]|$)`)
			s = re.ReplaceAllString(s, "${1}"+id+"${2}")
		}
		lines[i] = []byte(s)
	}
	return bytes.Join(lines, nil)
}

// firstWord is a line's first word, leading spaces and a byte-order mark
// skipped.
func firstWord(line string) string {
	line = strings.TrimLeft(strings.TrimPrefix(line, "\ufeff"), " \t")
	if i := strings.IndexAny(line, " \t\r\n"); i >= 0 {
		return line[:i]
	}
	return line
}

// rewriteContext copies a build context (as contextTar reads it) to dst
// as a plain tar, the regular file whose cleaned name is name (without
// regard to case, as ReadBuildContext found it, the one such entry) given
// data for its content; every other entry is copied as it is.
func rewriteContext(src io.Reader, dst io.Writer, name string, data []byte) error {
	tr, err := contextTar(src)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(dst)
	replaced := false
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the build context: %w", err)
		}
		if !replaced && strings.EqualFold(cleanEntry(hdr.Name), name) && hdr.FileInfo().Mode().IsRegular() &&
			hdr.Typeflag != tar.TypeLink && hdr.Typeflag != tar.TypeSymlink {
			h := *hdr
			h.Size = int64(len(data))
			if err := tw.WriteHeader(&h); err != nil {
				return fmt.Errorf("writing the build context: %w", err)
			}
			if _, err := tw.Write(data); err != nil {
				return fmt.Errorf("writing the build context: %w", err)
			}
			replaced = true
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("writing the build context: %w", err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return fmt.Errorf("writing the build context: %w", err)
		}
	}
	if !replaced {
		return fmt.Errorf("no %s in the build context to rewrite", name)
	}
	return tw.Close()
}

// rewriteBuild is a build's context with each image of plan the session
// pulled by digest through the proxy named by its id in the Dockerfile
// (text, at the build's dockerfile parameter), and each ADD URL of adds
// (as the Dockerfile writes it) by the fetch proxy's URL for it, in a
// new spool file at its start; nil when there is nothing to rewrite. The
// Dockerfile rewritten is judged again, and must name none of them any
// more: one the rewrite missed (written across lines) would be fetched by
// the engine itself.
func (b *Broker) rewriteBuild(f io.Reader, param string, text []byte, plan *BuildPlan, adds map[string]string) (*os.File, int64, *Refusal) {
	subst := map[string]string{}
	for _, img := range plan.Images {
		if id, ok := b.pulledDigest(img.Ref); ok {
			subst[img.Ref] = id
		}
	}
	if len(subst) == 0 && len(adds) == 0 {
		return nil, 0, nil
	}
	name, _, err := dockerfileName(param)
	if err != nil {
		return nil, 0, refuse("build", "the Dockerfile: %v", err)
	}
	out, err := rewriteAdds(rewriteDockerfile(text, subst), adds)
	if err != nil {
		return nil, 0, refuse("build", "the Dockerfile: %v", err)
	}
	again, rf := JudgeDockerfile(out)
	if rf != nil {
		return nil, 0, refuse("build", "the Dockerfile with its digest references and ADD URLs rewritten: %s", rf.Why)
	}
	for _, img := range again.Images {
		if _, ok := subst[img.Ref]; ok {
			return nil, 0, refuse("build", "%s: write it on its instruction's first line (the broker names it by the image's id there)", img.Ref)
		}
	}
	for _, u := range again.URLs {
		if _, ok := adds[u.URL]; ok {
			return nil, 0, refuse("build", "ADD %s: write the URL whole on one line (the broker sends it through its fetch proxy)", u.URL)
		}
	}
	nf, err := b.spoolFile()
	if err != nil {
		return nil, 0, refuse("build", "the build context: %v", err)
	}
	fail := func(err error) (*os.File, int64, *Refusal) {
		nf.Close()
		os.Remove(nf.Name())
		return nil, 0, refuse("build", "the build context: %v", err)
	}
	if err := rewriteContext(f, nf, name, out); err != nil {
		return fail(err)
	}
	n, err := nf.Seek(0, io.SeekCurrent)
	if err != nil {
		return fail(err)
	}
	if _, err := nf.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	return nf, n, nil
}
