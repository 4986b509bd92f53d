// SPDX-License-Identifier: Apache-2.0

//go:build linux

package dockertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestRegistryPushAndPull drives the registry as the distribution spec's
// client does, without an engine: a blob uploaded in parts, one whole,
// a mount, a wrong digest refused, a manifest whose blobs are missing
// refused, then one pushed and fetched by tag and digest; every request
// is recorded with the Host it came by.
func TestRegistryPushAndPull(t *testing.T) {
	r := StartRegistry(t)
	base := "http://" + r.Addr
	do := func(method, path string, body []byte, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	want := func(resp *http.Response, status int) {
		t.Helper()
		if resp.StatusCode != status {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %s %s, want %d", resp.Request.Method, resp.Request.URL.Path, resp.Status, b, status)
		}
	}
	want(do("GET", "/v2/", nil), http.StatusOK)

	// In parts: POST, PATCH, PUT with the digest.
	layer := []byte(strings.Repeat("layer data ", 1000))
	resp := do("POST", "/v2/app/blobs/uploads/", nil)
	want(resp, http.StatusAccepted)
	loc := resp.Header.Get("Location")
	resp = do("PATCH", loc, layer[:100])
	want(resp, http.StatusAccepted)
	if got := resp.Header.Get("Range"); got != "0-99" {
		t.Errorf("Range after 100 bytes: %q", got)
	}
	resp = do("PUT", resp.Header.Get("Location")+"?digest="+digestOf(layer), layer[100:])
	want(resp, http.StatusCreated)
	if resp.Header.Get("Docker-Content-Digest") != digestOf(layer) {
		t.Errorf("the upload's digest: %q", resp.Header.Get("Docker-Content-Digest"))
	}
	// A wrong digest is refused and stores nothing by that name.
	resp = do("POST", "/v2/app/blobs/uploads/", nil)
	want(resp, http.StatusAccepted)
	wrong := digestOf([]byte("something else"))
	want(do("PUT", resp.Header.Get("Location")+"?digest="+wrong, []byte("not that")), http.StatusBadRequest)
	want(do("HEAD", "/v2/app/blobs/"+wrong, nil), http.StatusNotFound)
	// Whole, then a mount of it into another repository.
	config := []byte(`{"rootfs":{"type":"layers","diff_ids":[]}}`)
	want(do("POST", "/v2/app/blobs/uploads/?digest="+digestOf(config), config), http.StatusCreated)
	want(do("POST", "/v2/other/blobs/uploads/?mount="+digestOf(layer)+"&from=app", nil), http.StatusCreated)

	resp = do("GET", "/v2/other/blobs/"+digestOf(layer), nil)
	want(resp, http.StatusOK)
	if b, _ := io.ReadAll(resp.Body); !bytes.Equal(b, layer) {
		t.Errorf("the blob came back as %d bytes, want %d", len(b), len(layer))
	}

	type desc struct {
		MediaType string `json:"mediaType"`
		Size      int    `json:"size"`
		Digest    string `json:"digest"`
	}
	manifest := func(layers ...desc) []byte {
		b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ManifestType,
			"config": desc{ConfigType, len(config), digestOf(config)}, "layers": layers})
		return b
	}
	missing := manifest(desc{LayerType, 3, digestOf([]byte("abc"))})
	want(do("PUT", "/v2/app/manifests/1", missing, "Content-Type", ManifestType), http.StatusBadRequest)
	want(do("GET", "/v2/app/manifests/1", nil), http.StatusNotFound)
	good := manifest(desc{LayerType, len(layer), digestOf(layer)})
	resp = do("PUT", "/v2/app/manifests/1", good, "Content-Type", ManifestType)
	want(resp, http.StatusCreated)
	if resp.Header.Get("Docker-Content-Digest") != digestOf(good) {
		t.Errorf("the manifest's digest: %q, want %s", resp.Header.Get("Docker-Content-Digest"), digestOf(good))
	}
	for _, ref := range []string{"1", digestOf(good)} {
		resp = do("GET", "/v2/app/manifests/"+ref, nil)
		want(resp, http.StatusOK)
		b, _ := io.ReadAll(resp.Body)
		if !bytes.Equal(b, good) || resp.Header.Get("Content-Type") != ManifestType || resp.Header.Get("Docker-Content-Digest") != digestOf(good) {
			t.Errorf("GET manifest %s: %s, %q, %q", ref, b, resp.Header.Get("Content-Type"), resp.Header.Get("Docker-Content-Digest"))
		}
	}
	resp = do("HEAD", "/v2/app/manifests/1", nil)
	want(resp, http.StatusOK)
	if resp.ContentLength != int64(len(good)) {
		t.Errorf("HEAD manifest: length %d, want %d", resp.ContentLength, len(good))
	}
	want(do("GET", "/v2/other/manifests/1", nil), http.StatusNotFound)
	want(do("DELETE", "/v2/app/manifests/1", nil), http.StatusMethodNotAllowed)

	reqs := r.Requests()
	if !Saw(reqs, "PUT", r.Addr, "/v2/app/manifests/1") || !Saw(reqs, "GET", r.Addr, "/v2/") {
		t.Errorf("the requests recorded: %v", reqs)
	}
	if len(reqs) != 18 {
		t.Errorf("%d requests recorded, want 18: %v", len(reqs), reqs)
	}
}

// TestRegistryRedirectUploads: with RedirectUploads, an upload's start
// answers an absolute Location on the upload host, which takes the parts
// only with the _state it gave; the registry itself takes none, and the
// blob is the registry's once the upload host has it.
func TestRegistryRedirectUploads(t *testing.T) {
	r := StartRegistry(t)
	up := StartUploadHost(t, "127.0.0.4", r)
	r.RedirectUploads(up)
	do := func(method, u string, body []byte) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, u, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	want := func(resp *http.Response, status int) {
		t.Helper()
		if resp.StatusCode != status {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %s %s, want %d", resp.Request.Method, resp.Request.URL, resp.Status, b, status)
		}
	}
	layer := []byte(strings.Repeat("uploaded elsewhere ", 500))
	resp := do("POST", "http://"+r.Addr+"/v2/app/blobs/uploads/", nil)
	want(resp, http.StatusAccepted)
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, "http://"+up.Addr+"/v2/app/blobs/uploads/") || !strings.Contains(loc, "?_state=") {
		t.Fatalf("the upload's Location: %q, want one on %s with a _state", loc, up.Addr)
	}
	// Not on the registry's host, nor without the _state.
	path, _, _ := strings.Cut(strings.TrimPrefix(loc, "http://"+up.Addr), "?")
	want(do("PATCH", "http://"+r.Addr+path, layer), http.StatusNotFound)
	want(do("PATCH", "http://"+up.Addr+path, layer), http.StatusBadRequest)
	resp = do("PATCH", loc, layer[:100])
	want(resp, http.StatusAccepted)
	next := resp.Header.Get("Location")
	if !strings.HasPrefix(next, "http://"+up.Addr+"/") {
		t.Errorf("the PATCH's Location: %q", next)
	}
	want(do("PUT", next+"&digest="+digestOf(layer), layer[100:]), http.StatusCreated)
	want(do("HEAD", "http://"+r.Addr+"/v2/app/blobs/"+digestOf(layer), nil), http.StatusOK)
	if got := up.Requests(); len(got) != 3 || got[1].Method != "PATCH" || got[2].Method != "PUT" {
		t.Errorf("the upload host recorded %v", got)
	}
	if r.Tagged("app", "1") != "" {
		t.Errorf("a manifest before any push")
	}
}
