// Package image builds meshperf's OCI images without a registry or a
// container runtime: files from the host (static binaries, and what the
// capture needs) packed into layers on an empty base, written as OCI image
// layout archives that `ctr images import` loads into a node's containerd,
// or pushed to a user's registry (push.go).
//
// Why go-containerregistry rather than a Dockerfile: no Docker or BuildKit
// runs here, and images from scratch need nothing a builder adds; the
// library computes digests and manifests the way registries check them.
//
// Images are deterministic: the same files give the same digests (fixed
// times, owners and order), so that rebuilding an unchanged binary changes
// nothing on a node, and a layer shared by two images is stored once.
package image

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/meshperf/meshperf/internal/version"
)

// DefaultRepo is the repository of images that never leave the machine:
// a name no registry answers to, so that a node can only have them by import
// (pods use imagePullPolicy: Never).
const DefaultRepo = "meshperf.local"

// The images' names under a repository.
const (
	Meshperf = "meshperf"
	Proxy    = "meshperf-proxy"
	Pause    = "pause"
)

// epoch is every file's and image's time: a fixed one keeps digests
// reproducible.
var epoch = time.Unix(0, 0).UTC()

// invalidTagChars are what a tag may not hold (tags are
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}).
var (
	invalidTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)
	validTag        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// Tag is this binary's version as an image tag.
func Tag() string { return SanitiseTag(version.String()) }

// SanitiseTag turns a version into a valid tag: characters a tag may not
// hold become '-' ("v1.2.3+dirty" -> "v1.2.3-dirty"), a leading '.' or '-'
// becomes '_', and it is cut to 128 characters.
func SanitiseTag(v string) string {
	t := invalidTagChars.ReplaceAllString(v, "-")
	if t == "" {
		return "dev"
	}
	if t[0] == '.' || t[0] == '-' {
		t = "_" + t[1:]
	}
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// Ref is the reference of image name under repo at tag ("" for Tag()):
// "meshperf.local/meshperf:dev-0123456789ab".
func Ref(repo, name, tag string) string {
	if tag == "" {
		tag = Tag()
	}
	return strings.TrimSuffix(repo, "/") + "/" + name + ":" + tag
}

// CheckRepo says why repo cannot prefix image references, if it cannot.
func CheckRepo(repo string) error {
	if _, err := name.NewRepository(strings.TrimSuffix(repo, "/")+"/"+Meshperf, name.StrictValidation); err != nil {
		return fmt.Errorf("image repository %q is not a valid registry/path (e.g. registry.example:5000/team): %v", repo, err)
	}
	return nil
}

// CheckTag says why tag is not a valid image tag, if it is not.
func CheckTag(tag string) error {
	if !validTag.MatchString(tag) {
		return fmt.Errorf("image tag %q is not valid: up to 128 of A-Z a-z 0-9 _ . -, not starting with . or -", tag)
	}
	return nil
}

// File is one entry of a layer: a regular file with its content from
// Source (a host path, read when the layer is written; a zero Mode takes
// the host file's) or Data, or a symbolic link to Link. Parent directories
// are added (0755).
type File struct {
	Path   string // absolute, in the image
	Mode   fs.FileMode
	Source string
	Data   []byte
	Link   string
}

// Spec is an image: its layers, bottom first, and how it runs.
type Spec struct {
	Layers     [][]File
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	Labels     map[string]string
}

// Build returns the image Spec describes, from scratch, for linux/amd64.
// Every Source is checked here, so that a missing file fails the build
// rather than a later write.
func Build(spec Spec) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, files := range spec.Layers {
		layer, err := Layer(files)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "meshperf image build"},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Cmd = spec.Cmd
	cf.Config.Env = spec.Env
	cf.Config.WorkingDir = spec.WorkingDir
	cf.Config.User = spec.User
	cf.Config.Labels = spec.Labels
	return mutate.ConfigFile(img, cf)
}

// Layer returns one gzip-compressed OCI layer of files, in path order, each
// owned by root with the fixed time.
func Layer(files []File) (v1.Layer, error) {
	entries, err := layerEntries(files)
	if err != nil {
		return nil, err
	}
	// The opener writes the tar afresh on each call through a pipe, so that
	// a binary of tens of megabytes is never held whole in memory; closing
	// the reader early ends the writer with an error.
	opener := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeLayerTar(pw, entries)) }()
		return pr, nil
	}
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// layerEntries checks files and returns them with their parent directories
// added, sorted by path.
func layerEntries(files []File) ([]File, error) {
	seen := map[string]bool{}
	var out []File
	addDirs := func(p string) {
		for d := path.Dir(p); d != "/" && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			out = append(out, File{Path: d, Mode: fs.ModeDir | 0o755})
		}
	}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("image file %q: want a clean absolute path", f.Path)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("image file %s given twice", f.Path)
		}
		kinds := 0
		for _, set := range []bool{f.Source != "", f.Data != nil, f.Link != ""} {
			if set {
				kinds++
			}
		}
		if kinds > 1 {
			return nil, fmt.Errorf("image file %s: give one of Source, Data and Link", f.Path)
		}
		if f.Source != "" {
			st, err := os.Stat(f.Source)
			if err != nil {
				return nil, fmt.Errorf("image file %s: %w", f.Path, err)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("image file %s: %s is not a regular file", f.Path, f.Source)
			}
		}
		seen[f.Path] = true
		addDirs(f.Path)
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func writeLayerTar(w io.Writer, entries []File) error {
	tw := tar.NewWriter(w)
	for _, f := range entries {
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(f.Path, "/"),
			Mode:    int64(f.Mode.Perm()),
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
		case f.Source != "":
			if err := writeSourceFile(tw, hdr, f.Source); err != nil {
				return fmt.Errorf("image file %s: %w", f.Path, err)
			}
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func writeSourceFile(tw *tar.Writer, hdr *tar.Header, source string) error {
	src, err := os.Open(source)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
	if hdr.Mode == 0 {
		hdr.Mode = int64(st.Mode().Perm())
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if n, err := io.Copy(tw, src); err != nil {
		return err
	} else if n != st.Size() {
		return fmt.Errorf("%s changed size while being read", source)
	}
	return nil
}
