// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dockertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Media types of the image manifest, image config and layers a Registry
// serves (Docker's image manifest version 2, schema 2).
const (
	ManifestType = "application/vnd.docker.distribution.manifest.v2+json"
	ConfigType   = "application/vnd.docker.container.image.v1+json"
	LayerType    = "application/vnd.docker.image.rootfs.diff.tar"
)

// MarkerPath is the file the layer a Registry adds to every image it
// serves holds: that image's Marker, so that a container shows its
// image came from the registry and not from the engine's store.
const MarkerPath = "/registry-marker"

// Registry is a Docker Registry HTTP API v2 server for one test (the
// distribution spec's pull and push endpoints, no auth): it serves images
// made from ones an engine already has, takes pushes, and records every
// request it gets, so that a test judges by what the registry saw.
//
// It listens on 127.0.0.1: the engine speaks plain HTTP to registries on
// 127.0.0.0/8 by default, so no TLS is needed, and nothing leaves the
// machine. Blobs live in a directory of its own; the server stops and the
// directory goes in t.Cleanup.
type Registry struct {
	// Addr is its host:port, as an image name gives it
	// (127.0.0.1:PORT/tools:1).
	Addr string
	dir  string
	srv  *http.Server

	mu        sync.Mutex
	reqs      []Request
	manifests map[string]map[string]string // repository -> tag or digest -> manifest digest
	types     map[string]string            // manifest digest -> media type
	uploads   map[string]bool              // upload ids in progress
	realm     *Side                        // RequireToken's
	blobHost  *Side                        // RedirectBlobs'
	upHost    *Side                        // RedirectUploads'
}

// Side is a server beside a Registry on another port of 127.0.0.1: the
// auth realm it sends the engine to for a token (StartRealm), the host
// it redirects blob fetches to (StartBlobHost), or the host it sends
// blob uploads to (StartUploadHost). It records every request it gets.
type Side struct {
	// Addr is its host:port.
	Addr  string
	token string
	mu    sync.Mutex
	reqs  []Request
	// user and pass are the login a realm asks for (RequireLogin).
	user, pass string
}

// RequireLogin makes a realm give its token only to a request with
// user's basic credentials (a registry account's, as the client sends
// them); any other gets 401.
func (s *Side) RequireLogin(user, pass string) {
	s.mu.Lock()
	s.user, s.pass = user, pass
	s.mu.Unlock()
}

// Requests are the requests the side server got so far, in order.
func (s *Side) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func startSide(t testing.TB, ip string, h func(s *Side, w http.ResponseWriter, q *http.Request)) *Side {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	s := &Side{Addr: l.Addr().String(), token: hex.EncodeToString(rnd[:])}
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		s.mu.Lock()
		user, _, _ := q.BasicAuth()
		s.reqs = append(s.reqs, Request{Method: q.Method, Path: q.URL.Path, Host: q.Host, User: user})
		s.mu.Unlock()
		h(s, w, q)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// StartRealm starts an auth realm on ip (an address of the loopback
// device: 127.0.0.2 is another host than the registry's 127.0.0.1 to a
// policy): GET /token answers a bearer token (the same for every client
// it accepts, new per realm), which RequireToken makes a registry ask
// for.
func StartRealm(t testing.TB, ip string) *Side {
	return startSide(t, ip, func(s *Side, w http.ResponseWriter, q *http.Request) {
		if q.URL.Path != "/token" {
			http.NotFound(w, q)
			return
		}
		s.mu.Lock()
		wantUser, wantPass := s.user, s.pass
		s.mu.Unlock()
		if u, p, _ := q.BasicAuth(); wantUser != "" && (u != wantUser || p != wantPass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test-realm"`)
			http.Error(w, `{"details":"incorrect username or password"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": s.token, "access_token": s.token})
	})
}

// RequireToken makes r answer every request without realm's bearer
// token with 401 and a challenge naming realm (as Docker Hub does).
func (r *Registry) RequireToken(realm *Side) {
	r.mu.Lock()
	r.realm = realm
	r.mu.Unlock()
}

// StartBlobHost starts a host on ip (as StartRealm's) that serves r's
// blobs at /blobs/<digest>, as a CDN a registry redirects to;
// RedirectBlobs makes r send there.
func StartBlobHost(t testing.TB, ip string, r *Registry) *Side {
	return startSide(t, ip, func(s *Side, w http.ResponseWriter, q *http.Request) {
		d := strings.TrimPrefix(q.URL.Path, "/blobs/")
		if !r.hasBlob(d) {
			http.NotFound(w, q)
			return
		}
		f, err := os.Open(r.blobPath(d))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, q, "", time.Time{}, f)
	})
}

// RedirectBlobs makes r answer blob fetches with a 307 to host.
func (r *Registry) RedirectBlobs(host *Side) {
	r.mu.Lock()
	r.blobHost = host
	r.mu.Unlock()
}

// StartUploadHost starts a host on ip (as StartRealm's) that takes r's
// blob uploads, as a registry's storage front on another host does:
// RedirectUploads makes r answer an upload's start with a Location
// there, an absolute URL carrying a _state parameter the host wants
// back, and the parts and the last PUT it gets are stored as r's
// upload (the blob is then r's). It asks for no token: the engine sends
// the registry's to the registry's host only.
func StartUploadHost(t testing.TB, ip string, r *Registry) *Side {
	return startSide(t, ip, func(s *Side, w http.ResponseWriter, q *http.Request) {
		m := uploadRoute.FindStringSubmatch(q.URL.Path)
		if m == nil || q.Method != http.MethodPatch && q.Method != http.MethodPut {
			regError(w, http.StatusNotFound, "UNSUPPORTED", q.Method+" "+q.URL.Path+": not an endpoint of this upload host")
			return
		}
		if q.URL.Query().Get("_state") != m[2] {
			// A signed upload URL's parameters must come back as given.
			regError(w, http.StatusBadRequest, "BLOB_UPLOAD_INVALID", "the upload URL's _state is missing or wrong")
			return
		}
		r.upload(w, q, m[1], m[2])
	})
}

// RedirectUploads makes r send blob uploads to host (StartUploadHost):
// an upload's start answers a Location there, and r itself takes no
// upload's parts.
func (r *Registry) RedirectUploads(host *Side) {
	r.mu.Lock()
	r.upHost = host
	r.mu.Unlock()
}

// uploadLocation is where upload id of repo goes on: r's own path, or
// the upload host's absolute URL.
func (r *Registry) uploadLocation(repo, id string) string {
	r.mu.Lock()
	up := r.upHost
	r.mu.Unlock()
	if up == nil {
		return "/v2/" + repo + "/blobs/uploads/" + id
	}
	return "http://" + up.Addr + "/v2/" + repo + "/blobs/uploads/" + id + "?_state=" + id
}

// Tagged is the digest of the manifest repo:ref names in r, "" when
// none: what a push left there.
func (r *Registry) Tagged(repo, ref string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.manifests[repo][ref]
}

// Request is one request a Registry got: its method, path and Host
// header (the name the engine reached it by).
type Request struct {
	Method, Path, Host string
	// User is the basic credentials' user name it carried, if any.
	User string
}

// String is "GET 127.0.0.1:5000/v2/tools/manifests/1".
func (r Request) String() string { return r.Method + " " + r.Host + r.Path }

// Image is an image a Registry serves.
type Image struct {
	// Repo and Tag name it in the registry (tools, 1).
	Repo, Tag string
	// Digest is the manifest's; Config the config's, which is the image's
	// id in the engine once pulled; Layers the layers', base first, the
	// marker's last.
	Digest, Config string
	Layers         []string
	// Marker is the content of MarkerPath in the image, unique to it.
	Marker string
}

// StartRegistry starts an empty registry on 127.0.0.1.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	// Not the test's temporary directory: that may be in memory, and
	// layers are large.
	dir, err := os.MkdirTemp("/var/tmp", "sluice-registry-")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"blobs", "uploads"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Addr: l.Addr().String(), dir: dir, manifests: map[string]map[string]string{},
		types: map[string]string{}, uploads: map[string]bool{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(func() {
		_ = r.srv.Close()
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s: %v", dir, err)
		}
	})
	return r
}

// Requests are the requests the registry got so far, in order.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Saw reports whether a request of method for path, by the Host host,
// came among reqs.
func Saw(reqs []Request, method, host, path string) bool {
	for _, q := range reqs {
		if q.Method == method && q.Host == host && q.Path == path {
			return true
		}
	}
	return false
}

// AddImage serves repo:tag, made from the engine's image from (`docker
// save`: its config and layers) with one layer more holding MarkerPath,
// whose content is new: every image added has a config, and so an id,
// of its own, and a pull of it must fetch that layer and config from
// the registry.
func (r *Registry) AddImage(t testing.TB, e *Engine, from, repo, tag string) *Image {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	config, layers, err := r.save(ctx, e, from)
	if err != nil {
		t.Fatalf("registry: %s: %v", from, err)
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	img := &Image{Repo: repo, Tag: tag, Marker: "registry-" + hex.EncodeToString(rnd[:])}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	content := []byte(img.Marker + "\n")
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(MarkerPath, "/"), Mode: 0o644, Size: int64(len(content)),
		ModTime: time.Now(), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(content)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	marker, err := r.putBlob(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	layers = append(layers, marker)

	// The config names the layers by their uncompressed digests (the
	// layers are served uncompressed: the same digests).
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(config, &cfg); err != nil {
		t.Fatalf("registry: %s's config: %v", from, err)
	}
	var rootfs struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	}
	if err := json.Unmarshal(cfg["rootfs"], &rootfs); err != nil || len(rootfs.DiffIDs) != len(layers)-1 {
		t.Fatalf("registry: %s's config: rootfs %s (%v), with %d layers saved", from, cfg["rootfs"], err, len(layers)-1)
	}
	for i, id := range rootfs.DiffIDs {
		if id != layers[i].digest {
			t.Fatalf("registry: %s's layer %d: saved as %s, its config says %s", from, i, layers[i].digest, id)
		}
	}
	rootfs.DiffIDs = append(rootfs.DiffIDs, marker.digest)
	var history []json.RawMessage
	if h, ok := cfg["history"]; ok {
		if err := json.Unmarshal(h, &history); err != nil {
			t.Fatalf("registry: %s's history: %v", from, err)
		}
	}
	created := time.Now().UTC().Format(time.RFC3339Nano)
	entry, _ := json.Marshal(map[string]string{"created": created, "created_by": "the test registry's marker layer"})
	history = append(history, entry)
	cfg["rootfs"], _ = json.Marshal(rootfs)
	cfg["history"], _ = json.Marshal(history)
	cfg["created"], _ = json.Marshal(created)
	newConfig, _ := json.Marshal(cfg)
	cb, err := r.putBlob(newConfig)
	if err != nil {
		t.Fatal(err)
	}

	type desc struct {
		MediaType string `json:"mediaType"`
		Size      int64  `json:"size"`
		Digest    string `json:"digest"`
	}
	m := struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		Config        desc   `json:"config"`
		Layers        []desc `json:"layers"`
	}{SchemaVersion: 2, MediaType: ManifestType, Config: desc{ConfigType, cb.size, cb.digest}}
	for _, l := range layers {
		m.Layers = append(m.Layers, desc{LayerType, l.size, l.digest})
		img.Layers = append(img.Layers, l.digest)
	}
	mb, _ := json.MarshalIndent(m, "", "   ")
	mf, err := r.putBlob(mb)
	if err != nil {
		t.Fatal(err)
	}
	img.Digest, img.Config = mf.digest, cb.digest
	r.tag(repo, tag, mf.digest, ManifestType)
	return img
}

// blob is a stored blob's digest and size.
type blob struct {
	digest string
	size   int64
}

// save runs `docker save from` and stores its layers as blobs, returning
// the image's config and its layers in order. Both forms of the archive
// name them in manifest.json (the engine's own layout, <id>/layer.tar,
// and the OCI layout, blobs/sha256/<hex>); a layer the archive holds
// twice may be a symbolic link to the first.
func (r *Registry) save(ctx context.Context, e *Engine, from string) ([]byte, []blob, error) {
	c := exec.CommandContext(ctx, "docker", "save", from)
	c.Env = append(os.Environ(), "DOCKER_HOST="+e.Host)
	var errb bytes.Buffer
	c.Stderr = &errb
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("docker save: %w", err)
	}
	files := map[string]blob{}   // archive path -> stored blob
	links := map[string]string{} // archive path -> the path it links to
	small := map[string][]byte{} // JSON files, kept to read
	tr := tar.NewReader(out)
	var rerr error
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rerr = fmt.Errorf("docker save's archive: %w", err)
			break
		}
		name := path.Clean(h.Name)
		switch h.Typeflag {
		case tar.TypeSymlink:
			links[name] = path.Join(path.Dir(name), h.Linkname)
		case tar.TypeReg:
			if strings.HasSuffix(name, ".json") && h.Size < 1<<20 {
				b, err := io.ReadAll(tr)
				if err != nil {
					rerr = err
					break
				}
				small[name] = b
				// An OCI layout's config is a blob too, with no .json.
				continue
			}
			b, err := r.storeBlob(tr)
			if err != nil {
				rerr = err
				break
			}
			files[name] = b
		}
		if rerr != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := c.Wait(); err != nil {
		return nil, nil, fmt.Errorf("docker save %s: %w: %s", from, err, strings.TrimSpace(errb.String()))
	}
	if rerr != nil {
		return nil, nil, rerr
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(small["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		return nil, nil, fmt.Errorf("docker save's manifest.json: %v (%d images)", err, len(manifest))
	}
	resolve := func(p string) string {
		p = path.Clean(p)
		for i := 0; i < 8; i++ {
			to, ok := links[p]
			if !ok {
				break
			}
			p = to
		}
		return p
	}
	config, ok := small[resolve(manifest[0].Config)]
	if !ok {
		b, found := files[resolve(manifest[0].Config)]
		if !found {
			return nil, nil, fmt.Errorf("docker save's archive has no config %s", manifest[0].Config)
		}
		if config, err = os.ReadFile(r.blobPath(b.digest)); err != nil {
			return nil, nil, err
		}
	}
	var layers []blob
	for _, l := range manifest[0].Layers {
		b, ok := files[resolve(l)]
		if !ok {
			return nil, nil, fmt.Errorf("docker save's archive has no layer %s", l)
		}
		layers = append(layers, b)
	}
	return config, layers, nil
}

// blobPath is where the blob of digest d (sha256:hex) is stored.
func (r *Registry) blobPath(d string) string {
	return filepath.Join(r.dir, "blobs", strings.TrimPrefix(d, "sha256:"))
}

// storeBlob stores what src reads as a blob.
func (r *Registry) storeBlob(src io.Reader) (blob, error) {
	f, err := os.CreateTemp(filepath.Join(r.dir, "uploads"), "blob-")
	if err != nil {
		return blob{}, err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return blob{}, fmt.Errorf("store a blob: %w", err)
	}
	b := blob{digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), size: n}
	if err := os.Rename(f.Name(), r.blobPath(b.digest)); err != nil {
		return blob{}, fmt.Errorf("store a blob: %w", err)
	}
	return b, nil
}

func (r *Registry) putBlob(data []byte) (blob, error) { return r.storeBlob(bytes.NewReader(data)) }

func (r *Registry) hasBlob(d string) bool {
	if !digestRE.MatchString(d) {
		return false
	}
	_, err := os.Stat(r.blobPath(d))
	return err == nil
}

// tag names manifest d in repo by ref (and by its digest).
func (r *Registry) tag(repo, ref, d, mediaType string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.manifests[repo] == nil {
		r.manifests[repo] = map[string]string{}
	}
	r.manifests[repo][ref] = d
	r.manifests[repo][d] = d
	r.types[d] = mediaType
}

// The distribution spec's repository name (path components of lower-case
// letters and digits joined by separators), and its routes.
const nameRE = `[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*`

var (
	manifestRoute = regexp.MustCompile(`^/v2/(` + nameRE + `)/manifests/([A-Za-z0-9_:.+-]+)$`)
	uploadsRoute  = regexp.MustCompile(`^/v2/(` + nameRE + `)/blobs/uploads/?$`)
	uploadRoute   = regexp.MustCompile(`^/v2/(` + nameRE + `)/blobs/uploads/([a-f0-9]+)$`)
	blobRoute     = regexp.MustCompile(`^/v2/(` + nameRE + `)/blobs/([A-Za-z0-9_:.+-]+)$`)
	digestRE      = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
)

func (r *Registry) serveHTTP(w http.ResponseWriter, q *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, Request{Method: q.Method, Path: q.URL.Path, Host: q.Host})
	realm, blobHost, upHost := r.realm, r.blobHost, r.upHost
	r.mu.Unlock()
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	p := q.URL.Path
	if realm != nil && q.Header.Get("Authorization") != "Bearer "+realm.token {
		c := fmt.Sprintf(`Bearer realm="http://%s/token",service="test-registry"`, realm.Addr)
		for _, re := range []*regexp.Regexp{manifestRoute, blobRoute, uploadsRoute, uploadRoute} {
			if m := re.FindStringSubmatch(p); m != nil {
				c += fmt.Sprintf(`,scope="repository:%s:pull"`, m[1])
				break
			}
		}
		w.Header().Set("WWW-Authenticate", c)
		regError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return
	}
	get := q.Method == http.MethodGet || q.Method == http.MethodHead
	switch {
	case p == "/v2/" && get:
		w.WriteHeader(http.StatusOK)
	case manifestRoute.MatchString(p):
		m := manifestRoute.FindStringSubmatch(p)
		switch {
		case get:
			r.getManifest(w, q, m[1], m[2])
		case q.Method == http.MethodPut:
			r.putManifest(w, q, m[1], m[2])
		default:
			regError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", q.Method+" of a manifest")
		}
	case uploadsRoute.MatchString(p) && q.Method == http.MethodPost:
		r.startUpload(w, q, uploadsRoute.FindStringSubmatch(p)[1])
	case uploadRoute.MatchString(p) && (q.Method == http.MethodPatch || q.Method == http.MethodPut):
		if upHost != nil {
			regError(w, http.StatusNotFound, "BLOB_UPLOAD_UNKNOWN", "uploads go to the upload host "+upHost.Addr)
			return
		}
		m := uploadRoute.FindStringSubmatch(p)
		r.upload(w, q, m[1], m[2])
	case blobRoute.MatchString(p) && get:
		d := blobRoute.FindStringSubmatch(p)[2]
		if !r.hasBlob(d) {
			regError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry: "+d)
			return
		}
		if blobHost != nil {
			http.Redirect(w, q, "http://"+blobHost.Addr+"/blobs/"+d, http.StatusTemporaryRedirect)
			return
		}
		f, err := os.Open(r.blobPath(d))
		if err != nil {
			regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", d)
		w.Header().Set("Etag", `"`+d+`"`)
		http.ServeContent(w, q, "", time.Time{}, f)
	default:
		regError(w, http.StatusNotFound, "UNSUPPORTED", q.Method+" "+p+": not an endpoint of this registry")
	}
}

// regError answers with the distribution spec's error form.
func regError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

func (r *Registry) getManifest(w http.ResponseWriter, q *http.Request, repo, ref string) {
	r.mu.Lock()
	d, ok := r.manifests[repo][ref]
	mediaType := r.types[d]
	r.mu.Unlock()
	if !ok {
		regError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown: "+repo+":"+ref)
		return
	}
	b, err := os.ReadFile(r.blobPath(d))
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", d)
	w.Header().Set("Etag", `"`+d+`"`)
	http.ServeContent(w, q, "", time.Time{}, bytes.NewReader(b))
}

// putManifest takes a pushed manifest whose config and layers the
// registry has.
func (r *Registry) putManifest(w http.ResponseWriter, q *http.Request, repo, ref string) {
	body, err := io.ReadAll(io.LimitReader(q.Body, 4<<20))
	if err != nil {
		regError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	var m struct {
		MediaType string
		Config    struct{ Digest string }
		Layers    []struct{ Digest string }
	}
	if err := json.Unmarshal(body, &m); err != nil {
		regError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	mediaType := q.Header.Get("Content-Type")
	if mediaType == "" {
		mediaType = m.MediaType
	}
	if mediaType != ManifestType && mediaType != "application/vnd.oci.image.manifest.v1+json" {
		regError(w, http.StatusBadRequest, "MANIFEST_INVALID", "not a manifest this registry takes: "+mediaType)
		return
	}
	for _, d := range append([]string{m.Config.Digest}, func() (ds []string) {
		for _, l := range m.Layers {
			ds = append(ds, l.Digest)
		}
		return ds
	}()...) {
		if !r.hasBlob(d) {
			regError(w, http.StatusBadRequest, "MANIFEST_BLOB_UNKNOWN", "blob unknown to registry: "+d)
			return
		}
	}
	b, err := r.putBlob(body)
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	if digestRE.MatchString(ref) && ref != b.digest {
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", "the manifest's digest is "+b.digest)
		return
	}
	r.tag(repo, ref, b.digest, mediaType)
	w.Header().Set("Location", "/v2/"+repo+"/manifests/"+b.digest)
	w.Header().Set("Docker-Content-Digest", b.digest)
	w.WriteHeader(http.StatusCreated)
}

// startUpload begins a blob upload: a mount of a blob the registry has
// (from any repository: blobs are shared here), a whole upload with its
// digest, or an upload in parts.
func (r *Registry) startUpload(w http.ResponseWriter, q *http.Request, repo string) {
	if d := q.URL.Query().Get("mount"); d != "" && r.hasBlob(d) {
		blobCreated(w, repo, d)
		return
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	f, err := os.Create(filepath.Join(r.dir, "uploads", id))
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	f.Close()
	r.mu.Lock()
	r.uploads[id] = true
	r.mu.Unlock()
	if q.URL.Query().Get("digest") != "" {
		r.upload(w, q, repo, id)
		return
	}
	w.Header().Set("Location", r.uploadLocation(repo, id))
	w.Header().Set("Docker-Upload-UUID", id)
	w.Header().Set("Range", "0-0")
	w.WriteHeader(http.StatusAccepted)
}

// upload appends a part to upload id (PATCH), or its last part and ends
// it (PUT with the blob's digest, which must be right).
func (r *Registry) upload(w http.ResponseWriter, q *http.Request, repo, id string) {
	r.mu.Lock()
	ok := r.uploads[id]
	r.mu.Unlock()
	if !ok {
		regError(w, http.StatusNotFound, "BLOB_UPLOAD_UNKNOWN", "blob upload unknown: "+id)
		return
	}
	name := filepath.Join(r.dir, "uploads", id)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	_, err = io.Copy(f, q.Body)
	st, serr := f.Stat()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = serr
	}
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	size := st.Size()
	if q.Method == http.MethodPatch {
		w.Header().Set("Location", r.uploadLocation(repo, id))
		w.Header().Set("Docker-Upload-UUID", id)
		w.Header().Set("Range", fmt.Sprintf("0-%d", max(size-1, 0)))
		w.WriteHeader(http.StatusAccepted)
		return
	}
	want := q.URL.Query().Get("digest")
	r.mu.Lock()
	delete(r.uploads, id)
	r.mu.Unlock()
	defer os.Remove(name)
	in, err := os.Open(name)
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	b, err := r.storeBlob(in)
	in.Close()
	if err != nil {
		regError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	if b.digest != want {
		// Stored under its true digest, which nothing names: no harm.
		regError(w, http.StatusBadRequest, "DIGEST_INVALID", fmt.Sprintf("the upload's digest is %s, not %s", b.digest, want))
		return
	}
	blobCreated(w, repo, b.digest)
}

func blobCreated(w http.ResponseWriter, repo, d string) {
	w.Header().Set("Location", "/v2/"+repo+"/blobs/"+d)
	w.Header().Set("Docker-Content-Digest", d)
	w.WriteHeader(http.StatusCreated)
}
