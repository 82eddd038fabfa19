package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The index annotations that name an image in an archive: containerd's
// import takes the first (the whole reference); the second is the OCI
// layout's own, the tag, as BuildKit writes it.
const (
	AnnotationContainerdName = "io.containerd.image.name"
	AnnotationRefName        = "org.opencontainers.image.ref.name"
)

// ContainerdNamespace is the containerd namespace the kubelet's CRI plugin
// reads images from.
const ContainerdNamespace = "k8s.io"

// WriteArchive writes img as an OCI image layout in a tar file at path, its
// index naming it ref. The file appears whole or not at all: it is written
// beside path and renamed.
func WriteArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if err := writeLayout(tmp, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeLayout(w io.Writer, tag name.Tag, img v1.Image) error {
	tw := tar.NewWriter(w)
	addBytes := func(name string, data []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mediaType,
			Digest:    digest,
			Size:      int64(len(manifest)),
			Annotations: map[string]string{
				AnnotationContainerdName: tag.Name(),
				AnnotationRefName:        tag.TagStr(),
			},
			Platform: &v1.Platform{Architecture: "amd64", OS: "linux"},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := addBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := addBytes("index.json", indexJSON); err != nil {
		return err
	}
	if err := addBytes(blobPath(digest), manifest); err != nil {
		return err
	}
	if err := addBytes(blobPath(configDigest), config); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	written := map[v1.Hash]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		if written[d] {
			continue
		}
		written[d] = true
		if err := addLayer(tw, l, d); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addLayer(tw *tar.Writer, l v1.Layer, d v1.Hash) error {
	size, err := l.Size()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	hdr := &tar.Header{Name: blobPath(d), Mode: 0o644, Size: size, ModTime: epoch, Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, rc)
	return err
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// Import loads the archive into the containerd at address (its socket), in
// the namespace the kubelet reads, with ctr (the path of containerd's
// client), unpacking it for the default snapshotter so that pods start
// without a pull.
func Import(ctx context.Context, ctr, address, archive string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, ctr, "--address", address, "--namespace", ContainerdNamespace, "images", "import", archive)
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("importing %s into containerd at %s: %v: %s", archive, address, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// ArchiveRef reads the reference an archive written by WriteArchive names
// its image with, and so checks that path is such an archive.
func ArchiveRef(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s is not an OCI image archive (no index.json): %v", path, err)
		}
		if hdr.Name != "index.json" {
			continue
		}
		var index v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", path, err)
		}
		for _, m := range index.Manifests {
			if ref := m.Annotations[AnnotationContainerdName]; ref != "" {
				return ref, nil
			}
		}
		return "", fmt.Errorf("%s names no image (no %s annotation in its index)", path, AnnotationContainerdName)
	}
}
