// SPDX-License-Identifier: Apache-2.0

package dockerbroker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// A build (POST /build, the legacy builder) is judged whole before the
// engine sees a byte of it: its query (network, cgroup parent, remote
// context), then its Dockerfile, read from the context the client
// uploads, which the broker keeps in a file of its own and forwards
// unchanged, so the engine builds exactly what was judged (an image the
// session pulled by digest is the one change: the Dockerfile names it
// by its id, digestref.go). What the
// engine does itself during a build is judged as the session's: the
// images FROM and COPY --from name (pulled first, through the broker's
// own pull, by registry; their ONBUILD triggers judged), and the URLs
// ADD fetches (by host). The RUN steps run in containers the engine
// makes below a cgroup parent of the session's (Config.OnBuild): they
// are the session's from their first instruction.

// DefaultMaxContext bounds a build context the broker keeps while it
// judges the build.
const DefaultMaxContext = 8 << 30

// build judges and forwards a build.
func (b *Broker) build(w http.ResponseWriter, r *http.Request) {
	const what = "build"
	if b.cfg.OnBuild == nil {
		b.refuse(w, http.StatusForbidden, refuse(what, "builds are not judged in this session"))
		return
	}
	if rf := JudgeBuildHeader(r.Header); rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	q := r.URL.Query()
	// What the query asks is judged before the context is read (with a
	// stand-in parent: the real one is made only for a build that runs).
	if _, rf := JudgeBuildQuery(q, b.cfg.Scope, "-"); rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	container := ""
	if ref, ok := strings.CutPrefix(q.Get("networkmode"), "container:"); ok {
		id, own := b.resolveOwn(r.Context(), ref)
		if !own {
			b.refuse(w, http.StatusForbidden, refuse(what, "--network container:%s: %s is not a container of this session", ref, ref))
			return
		}
		container = id
	}

	f, size, err := b.spool(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "sluice: the build context: "+err.Error())
		return
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	text, err := ReadBuildContext(f, q.Get("dockerfile"))
	if err != nil {
		b.refuse(w, http.StatusForbidden, refuse(what, "the Dockerfile: %v", err))
		return
	}
	plan, rf := JudgeDockerfile(text)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	// No pull of the session's may swap an image between its triggers'
	// judging and the build that runs them.
	b.images.RLock()
	defer b.images.RUnlock()
	pull, _ := strconv.ParseBool(q.Get("pull"))
	// With --platform the engine pulls the platform's variant of an image
	// it has for another: every image is pulled first, for that platform.
	platform := q.Get("platform")
	if rf := b.judgePlan(r.Context(), plan, pull || platform != "", platform, r.Header.Get("X-Registry-Config")); rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}

	if _, err := f.Seek(0, io.SeekStart); err != nil {
		writeError(w, http.StatusInternalServerError, "sluice: the build context: "+err.Error())
		return
	}
	// ADD URLs go through the broker's fetch proxy (addproxy.go), for
	// this build only.
	var addSubst map[string]string
	if len(plan.URLs) > 0 {
		subst, doneAdds, err := b.adds.add(plan.URLs)
		if err != nil {
			b.refuse(w, http.StatusForbidden, refuse(what, "its ADD URLs: %v", err))
			return
		}
		defer doneAdds()
		addSubst = subst
	}
	// Images pulled by digest through the proxy are named by their ids
	// (digestref.go), ADD URLs by the fetch proxy's; the context is
	// otherwise forwarded unchanged.
	nf, n, rf := b.rewriteBuild(f, q.Get("dockerfile"), text, plan, addSubst)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	if nf != nil {
		f.Close()
		os.Remove(f.Name())
		f, size = nf, n // removed by the deferred func above
	}
	parent, done, err := b.cfg.OnBuild(container)
	if err != nil {
		b.refuse(w, http.StatusForbidden, refuse(what, "its steps could not be placed in the session: %v", err))
		return
	}
	defer done()
	out, rf := JudgeBuildQuery(q, b.cfg.Scope, parent)
	if rf != nil {
		b.refuse(w, http.StatusForbidden, rf)
		return
	}
	// Every image the build needs is on the engine and judged: it pulls
	// nothing more (the client's --pull was done above).
	out.Del("pull")
	// The legacy builder, whatever the engine's default builder is.
	out.Set("version", "1")
	r.URL.RawQuery = out.Encode()
	r.Body = f
	r.ContentLength = size
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.FormatInt(size, 10))
	var after func(*http.Response) error
	if len(addSubst) > 0 {
		after = func(resp *http.Response) error {
			resp.Body = newAddRewriter(resp.Body, addSubst)
			resp.Header.Del("Content-Length")
			return nil
		}
	}
	b.forward(w, r, nil, after)
}

// spool keeps a build's context in a file of the broker's, bounded.
func (b *Broker) spool(body io.Reader) (*os.File, int64, error) {
	max := b.cfg.MaxContext
	if max <= 0 {
		max = DefaultMaxContext
	}
	f, err := b.spoolFile()
	if err != nil {
		return nil, 0, err
	}
	n, err := io.Copy(f, io.LimitReader(body, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("larger than the %d bytes a build context may have here", max)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, 0, err
	}
	return f, n, nil
}

// spoolFile is a new file of the broker's for a build's context.
func (b *Broker) spoolFile() (*os.File, error) {
	dir := b.cfg.SpoolDir
	if dir == "" {
		dir = os.TempDir()
	}
	return os.CreateTemp(dir, "sluice-build-*.tar")
}

// judgePlan judges what the engine would fetch for the build: each image
// is either on the engine already (and not to be pulled again) or of a
// registry the session's policy allows, and is then pulled through the
// engine first, so that its ONBUILD triggers are judged before the build
// runs them; each URL's host must be allowed.
func (b *Broker) judgePlan(ctx context.Context, plan *BuildPlan, pull bool, platform, auths string) *Refusal {
	judge := func(host string) error {
		if b.cfg.AllowRegistry == nil {
			return fmt.Errorf("%s is not in the session's allowlist", host)
		}
		return b.cfg.AllowRegistry(host)
	}
	fetch := func(hostport string) error {
		if b.cfg.AllowFetch == nil {
			return fmt.Errorf("%s is not in the session's allowlist", hostport)
		}
		return b.cfg.AllowFetch(hostport)
	}
	urls := func(p *BuildPlan, whose string) *Refusal {
		for _, u := range p.URLs {
			if u.Trigger {
				// The engine reads a trigger from the image: its URL
				// cannot go through the fetch proxy, and the engine
				// would follow its redirects unjudged.
				return refuse("build", "%sONBUILD ADD %s: the engine would fetch a trigger's URL itself and follow its redirects unjudged; ADD it in the Dockerfile that builds FROM the image, or fetch it in a RUN step, which runs confined", whose, u.URL)
			}
			if err := fetch(net.JoinHostPort(u.Host, u.Port)); err != nil {
				return refuse("build", "%sADD %s: the engine would fetch it itself: %v", whose, u.URL, err)
			}
		}
		return nil
	}
	if rf := urls(plan, ""); rf != nil {
		return rf
	}
	for _, img := range plan.Images {
		onbuild, local := b.imageOnBuild(ctx, img.Ref)
		if !local || pull || img.Platform != "" {
			platform := platform
			if img.Platform != "" {
				platform = img.Platform
			}
			if err := judge(img.Host); err != nil {
				return refuse("build", "%s: the engine would pull it: %v", img.Ref, err)
			}
			if err := b.pullImage(ctx, img.Ref, platform, registryAuth(auths, img.Host)); err != nil {
				return refuse("build", "%s: its pull failed: %v", img.Ref, err)
			}
			if onbuild, local = b.imageOnBuild(ctx, img.Ref); !local {
				return refuse("build", "%s: not on the engine after its pull", img.Ref)
			}
		}
		if !img.Base || len(onbuild) == 0 {
			continue
		}
		more, rf := JudgeOnBuild(onbuild)
		if rf != nil {
			return refuse("build", "FROM %s: its ONBUILD triggers: %s", img.Ref, rf.Why)
		}
		whose := img.Ref + "'s "
		if rf := urls(more, whose); rf != nil {
			return rf
		}
		for _, m := range more.Images {
			if _, ok := b.imageOnBuild(ctx, m.Ref); ok && !pull {
				continue
			}
			if err := judge(m.Host); err != nil {
				return refuse("build", "%sCOPY --from=%s: the engine would pull it: %v", whose, m.Ref, err)
			}
			// Pulled here, through the proxy, every hop judged: the
			// engine would otherwise pull it itself when the trigger
			// runs, following the registry's realm and redirects.
			if err := b.pullImage(ctx, m.Ref, platform, registryAuth(auths, m.Host)); err != nil {
				return refuse("build", "%sCOPY --from=%s: its pull failed: %v", whose, m.Ref, err)
			}
			if _, ok := b.imageOnBuild(ctx, m.Ref); !ok {
				return refuse("build", "%sCOPY --from=%s: not on the engine after its pull", whose, m.Ref)
			}
		}
	}
	return nil
}

// imageOnBuild inspects an image on the engine: its ONBUILD triggers,
// and whether the engine has it.
func (b *Broker) imageOnBuild(ctx context.Context, ref string) ([]string, bool) {
	var img struct {
		Config struct{ OnBuild []string }
	}
	if id, ok := b.pulledDigest(ref); ok {
		ref = id
	}
	if err := b.getJSON(ctx, "/images/"+url.PathEscape(ref)+"/json", &img); err != nil {
		return nil, false
	}
	return img.Config.OnBuild, true
}

// pullImage pulls ref (for platform, "" for the engine's) through the
// broker's pull proxy (a registry already judged; every host it leads
// to judged there) and waits for its end.
func (b *Broker) pullImage(ctx context.Context, ref, platform, auth string) error {
	name, tag := splitTag(ref)
	q := url.Values{}
	if platform != "" {
		q.Set("platform", platform)
	}
	return b.pullThrough(ctx, name, tag, q, auth, nil)
}

// registryAuth is the X-Registry-Auth of a pull from host, taken from a
// build's X-Registry-Config (the client's credentials of every registry
// it knows, base64url JSON by registry): "" when it has none for host.
func registryAuth(config, host string) string {
	if config == "" {
		return ""
	}
	raw, err := base64.URLEncoding.DecodeString(config)
	if err != nil {
		if raw, err = base64.RawURLEncoding.DecodeString(config); err != nil {
			return ""
		}
	}
	var auths map[string]json.RawMessage
	if json.Unmarshal(raw, &auths) != nil {
		return ""
	}
	for k, v := range auths {
		key := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://"), "/")
		key, _, _ = strings.Cut(key, "/")
		if key == "index.docker.io" || key == "docker.io" {
			key = "registry-1.docker.io"
		}
		if strings.EqualFold(key, host) {
			return base64.URLEncoding.EncodeToString(v)
		}
	}
	return ""
}

// splitTag splits an image reference into the name the engine pulls and
// its tag or digest; a reference with neither is pulled as :latest (the
// engine would pull every tag of a bare name).
func splitTag(ref string) (name, tag string) {
	if n, d, ok := strings.Cut(ref, "@"); ok {
		return n, d
	}
	slash := strings.LastIndex(ref, "/")
	if i := strings.LastIndex(ref, ":"); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}
