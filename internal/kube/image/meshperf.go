package image

import (
	"debug/elf"
	"errors"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
)

// BinaryPath is where meshperf's images carry the meshperf executable.
const BinaryPath = "/usr/local/bin/meshperf"

// BuildStaticHint says how to build a meshperf that an image can carry.
const BuildStaticHint = "build it static: CGO_ENABLED=0 go build -o bin/meshperf ./cmd/meshperf"

// CheckStatic says why the executable at path cannot run in an image from
// scratch, if it cannot: a dynamically linked one names an interpreter (the
// PT_INTERP program header) and libraries the image does not have.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("%s is for %s, the images are linux/amd64", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked, an image from scratch cannot run it", path)
		}
	}
	return nil
}

// binaryLayer is the layer holding only meshperf's executable: the first of
// the meshperf image and the whole of the pause image, so that a node
// stores it once.
func binaryLayer(exe string) []File {
	return []File{{Path: BinaryPath, Mode: 0o755, Source: exe}}
}

// PauseImage is the pod sandbox image (containerd's sandbox_image): the
// static meshperf executable running `meshperf pause`, which waits for
// SIGTERM or SIGINT and reaps the zombies a shared PID namespace leaves it.
//
// Why meshperf itself rather than a tiny program of its own: a separate
// program would have to be compiled when the images are built, which needs
// a Go toolchain where only the meshperf binary may be, or be committed as
// a binary, which this project does not do. Its layer is the meshperf
// image's first, byte for byte, so it costs a node no extra disk; what it
// costs is memory, a few megabytes of Go runtime per pod where the upstream
// pause uses a few hundred kilobytes, which matters little for the lab's
// pods (kwok's simulated pods run no sandbox at all).
func PauseImage(exe string) (v1.Image, error) {
	if exe == "" {
		return nil, errors.New("no meshperf executable given for the pause image")
	}
	if err := CheckStatic(exe); err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildStaticHint)
	}
	return Build(Spec{
		Layers:     [][]File{binaryLayer(exe)},
		Entrypoint: []string{BinaryPath, "pause"},
		User:       "65535:65535",
	})
}

// ProxyPath is where the proxy image carries meshperf-proxy.
const ProxyPath = "/usr/local/bin/meshperf-proxy"

// BuildStaticProxyHint says how to build a meshperf-proxy an image can carry.
const BuildStaticProxyHint = "build it static: scripts/build proxy (RUSTFLAGS=\"-C target-feature=+crt-static\" cargo build --release --target x86_64-unknown-linux-gnu)"

// imagePath is the PATH of meshperf's images: the capture finds
// iptables-restore through it (syscmd), as on a Debian host.
const imagePath = "PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// MeshperfImage is meshperf's image: the static executable exe (the pilot,
// the capture init container, the lab's load), then a layer with what the
// binary cannot carry: the host's iptables-restore for the capture, and
// the CRD manifests (CRDFiles) so that the pilot can install the CRDs
// without a Go module cache.
func MeshperfImage(exe string, crds []File) (v1.Image, error) {
	if err := CheckStatic(exe); err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildStaticHint)
	}
	extra, err := iptablesFiles()
	if err != nil {
		return nil, err
	}
	extra = append(extra, crds...)
	return Build(Spec{
		Layers:     [][]File{binaryLayer(exe), extra},
		Entrypoint: []string{BinaryPath},
		Env:        []string{imagePath},
	})
}

// CRDFiles are the CRD manifests the pilot installs (Istio's and the
// Gateway API's Gateway), found on this host, each at its ImagePath.
func CRDFiles() ([]File, error) {
	var out []File
	for _, m := range []crdmanifest.Manifest{crdmanifest.Istio, crdmanifest.GatewayAPI} {
		p, err := m.Path()
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: m.ImagePath, Mode: 0o644, Source: p})
	}
	return out, nil
}

// ProxyImage is meshperf-proxy's image: the static executable alone.
func ProxyImage(proxy string) (v1.Image, error) {
	if err := CheckStatic(proxy); err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildStaticProxyHint)
	}
	return Build(Spec{
		Layers:     [][]File{{{Path: ProxyPath, Mode: 0o755, Source: proxy}}},
		Entrypoint: []string{ProxyPath},
		Env:        []string{imagePath},
	})
}

// Sources are the host files meshperf's images are made of.
type Sources struct {
	Meshperf string // the static meshperf executable
	Proxy    string // the static meshperf-proxy executable
	CRDs     []File // the CRD manifests (CRDFiles)
}

// Named is an image with its name and reference.
type Named struct {
	Name  string // Meshperf, Proxy or Pause
	Ref   string
	Image v1.Image
}

// ArchiveName is the file name of an image's archive: "meshperf.oci.tar".
func ArchiveName(name string) string { return name + ".oci.tar" }

// All builds meshperf's three images, named under repo at tag ("" for
// Tag()). Every input is checked before any image is built.
func All(repo, tag string, src Sources) ([]Named, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if tag == "" {
		tag = Tag()
	}
	if err := CheckTag(tag); err != nil {
		return nil, err
	}
	if err := CheckStatic(src.Meshperf); err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildStaticHint)
	}
	if err := CheckStatic(src.Proxy); err != nil {
		return nil, fmt.Errorf("%w; %s", err, BuildStaticProxyHint)
	}
	meshperf, err := MeshperfImage(src.Meshperf, src.CRDs)
	if err != nil {
		return nil, err
	}
	proxy, err := ProxyImage(src.Proxy)
	if err != nil {
		return nil, err
	}
	pause, err := PauseImage(src.Meshperf)
	if err != nil {
		return nil, err
	}
	return []Named{
		{Meshperf, Ref(repo, Meshperf, tag), meshperf},
		{Proxy, Ref(repo, Proxy, tag), proxy},
		{Pause, Ref(repo, Pause, tag), pause},
	}, nil
}
