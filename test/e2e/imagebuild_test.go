package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"
)

// OCI media types of the image archive.
const (
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
	ociConfigType   = "application/vnd.oci.image.config.v1+json"
	ociLayerType    = "application/vnd.oci.image.layer.v1.tar" // uncompressed
)

// busyboxImage describes a one-layer image holding a static busybox.
type busyboxImage struct {
	// Ref is the image name, e.g. flextopo.local/busybox:1.
	Ref string
	// Busybox is the static busybox binary put at /bin/busybox; every applet
	// it lists (busybox --list) becomes a symlink in /bin.
	Busybox string
	// Cmd is the image's default command (config.Cmd); nil: sleep forever,
	// which makes the image usable as the pod sandbox (pause) image.
	Cmd []string
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// buildLayer returns the uncompressed layer tar: /bin/busybox, its applets
// as symlinks, a minimal /etc/passwd and /etc/group, and the empty
// directories a container runtime mounts over.
func (img busyboxImage) buildLayer() ([]byte, error) {
	bin, err := os.ReadFile(img.Busybox)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(img.Busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", img.Busybox, err)
	}
	applets := map[string]bool{}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets[a] = true
		}
	}
	names := make([]string, 0, len(applets))
	for a := range applets {
		names = append(names, a)
	}
	sort.Strings(names)

	// A fixed time keeps the layer, and so the image digest, reproducible.
	mtime := time.Unix(1700000000, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)),
			ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "root", "run", "var", "usr", "usr/bin", "sbin"} {
		if err := dir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := dir("tmp", 0o1777); err != nil {
		return nil, err
	}
	if err := file("bin/busybox", 0o755, bin); err != nil {
		return nil, err
	}
	for _, a := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox",
			Mode: 0o777, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")); err != nil {
		return nil, err
	}
	if err := file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeArchive writes the image as an OCI image layout tar (what
// `ctr images import` reads) to path. Standard library only: no registry,
// no image tooling.
func (img busyboxImage) writeArchive(path string) error {
	layer, err := img.buildLayer()
	if err != nil {
		return err
	}
	layerDigest := digestOf(layer)
	cmd := img.Cmd
	if cmd == nil {
		cmd = []string{"/bin/sleep", "infinity"}
	}
	config, err := json.Marshal(map[string]interface{}{
		"created":      "2023-11-14T22:13:20Z",
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config": map[string]interface{}{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Cmd":        cmd,
			"WorkingDir": "/",
		},
		"rootfs": map[string]interface{}{"type": "layers", "diff_ids": []string{layerDigest}},
		"history": []interface{}{map[string]interface{}{
			"created": "2023-11-14T22:13:20Z", "created_by": "flextopo e2e: busybox from " + img.Busybox,
		}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]interface{}{
		"schemaVersion": 2,
		"mediaType":     ociManifestType,
		"config":        ociDescriptor{MediaType: ociConfigType, Digest: digestOf(config), Size: int64(len(config))},
		"layers":        []ociDescriptor{{MediaType: ociLayerType, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	tag := img.Ref
	if i := strings.LastIndex(tag, ":"); i >= 0 && !strings.Contains(tag[i:], "/") {
		tag = tag[i+1:]
	}
	index, err := json.Marshal(map[string]interface{}{
		"schemaVersion": 2,
		"mediaType":     ociIndexType,
		"manifests": []ociDescriptor{{
			MediaType: ociManifestType, Digest: digestOf(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{
				"io.containerd.image.name":          img.Ref,
				"org.opencontainers.image.ref.name": tag,
			},
			Platform: &ociPlatform{Architecture: runtime.GOARCH, OS: "linux"},
		}},
	})
	if err != nil {
		return err
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	mtime := time.Unix(1700000000, 0).UTC()
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)),
			ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	blob := func(data []byte) error {
		return add("blobs/sha256/"+strings.TrimPrefix(digestOf(data), "sha256:"), data)
	}
	for _, step := range []func() error{
		func() error { return add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)) },
		func() error { return add("index.json", index) },
		func() error { return blob(layer) },
		func() error { return blob(config) },
		func() error { return blob(manifest) },
	} {
		if err := step(); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
