// SPDX-License-Identifier: Apache-2.0

//go:build linux

package criworld

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/tests/world"
)

// TestImage is the image every pod and container of a node runs: /pause
// (this package's pause command) and /probe (tests/probe), static.
const TestImage = "localhost/sluice-criworld:1"

// pausePackage is built into the image's /pause.
const pausePackage = "github.com/sluice-dev/sluice/tests/criworld/pause"

// ImageFile is a file of the test image: its path in the image and the
// file on this machine it is copied from.
type ImageFile struct {
	Path string // in the image, e.g. /probe
	From string // on this machine
}

// WriteTestImage writes the test image (TestImage: /pause and /probe,
// static) as an OCI archive into dir and returns its path, for a
// containerd this package does not run (`ctr images import` it), such as
// one in a booted system of tests/systemd.
func WriteTestImage(t testing.TB, dir string) string {
	t.Helper()
	pause, err := buildPause(dir)
	if err != nil {
		t.Fatalf("criworld: %v", err)
	}
	// The archive holds copies: the built pause is not needed beside it.
	defer os.Remove(pause)
	path, err := buildImage(dir, []ImageFile{{Path: "/pause", From: pause}, {Path: "/probe", From: world.BuildProbe(t)}})
	if err != nil {
		t.Fatalf("criworld: %v", err)
	}
	return path
}

// buildImage writes an OCI image layout archive of files to dir/image.tar,
// named TestImage: one uncompressed layer, no registry involved.
func buildImage(dir string, files []ImageFile) (string, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	now := time.Unix(0, 0)
	for _, d := range []string{"dev", "proc", "sys", "etc", "tmp", "run"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: now}); err != nil {
			return "", fmt.Errorf("image layer: %w", err)
		}
	}
	for _, f := range files {
		body, err := os.ReadFile(f.From)
		if err != nil {
			return "", fmt.Errorf("image file %s: %w", f.Path, err)
		}
		name := filepath.Clean(f.Path)[1:]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(body)), ModTime: now}); err != nil {
			return "", fmt.Errorf("image layer: %w", err)
		}
		if _, err := tw.Write(body); err != nil {
			return "", fmt.Errorf("image layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("image layer: %w", err)
	}
	layerDigest := digest(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Cmd": []string{"/pause"}, "Env": []string{"PATH=/"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return "", err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layer.Len()}},
	})
	if err != nil {
		return "", err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(manifest), "size": len(manifest),
			"platform":    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": TestImage, "org.opencontainers.image.ref.name": "1"},
		}},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "image.tar")
	out, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("image archive: %w", err)
	}
	defer out.Close()
	aw := tar.NewWriter(out)
	entries := []struct {
		name string
		body []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(digest(manifest)), manifest},
		{blobPath(digest(config)), config},
		{blobPath(layerDigest), layer.Bytes()},
	}
	for _, e := range entries {
		if err := aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.body)), ModTime: now}); err != nil {
			return "", fmt.Errorf("image archive: %w", err)
		}
		if _, err := aw.Write(e.body); err != nil {
			return "", fmt.Errorf("image archive: %w", err)
		}
	}
	if err := aw.Close(); err != nil {
		return "", fmt.Errorf("image archive: %w", err)
	}
	return path, out.Close()
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/sha256/" + d[len("sha256:"):] }

// buildPause builds the pause command, static, into dir.
func buildPause(dir string) (string, error) {
	path := filepath.Join(dir, "pause")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, pausePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pausePackage, err, out)
	}
	return path, nil
}
