// Package istiocrds finds Istio's CustomResourceDefinitions as Istio
// publishes them: the manifest kubernetes/customresourcedefinitions.gen.yaml
// of the istio.io/api module, at the version this binary decodes Istio's
// kinds with, so that the schemas a cluster validates against are the ones
// meshperf reads.
//
// Why not embed it: it is Istio's generated file, and this project commits
// nothing taken from another repository. A machine that builds meshperf has
// the module in its Go module cache; the images carry it at ImagePath.
package istiocrds

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	// Linked so that the build information of every binary that uses this
	// package names the module's version.
	_ "istio.io/api/networking/v1alpha3"
)

// Module is the Go module that publishes the manifest, and File its path
// inside the module.
const (
	Module = "istio.io/api"
	File   = "kubernetes/customresourcedefinitions.gen.yaml"
)

// Env names a manifest file that overrides the lookup.
const Env = "MESHPERF_ISTIO_CRDS"

// ImagePath is where meshperf's images carry the manifest.
const ImagePath = "/usr/share/meshperf/istio-crds.yaml"

// Version is the istio.io/api version this binary was built with. A test
// binary's build information lists no modules, so there it is the version
// the enclosing module requires (`go list -m`, run where the test runs).
func Version() (string, error) {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == Module {
				if d.Replace != nil {
					return d.Replace.Version, nil
				}
				return d.Version, nil
			}
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", Module).Output()
	if v := string(bytes.TrimSpace(out)); err == nil && v != "" {
		return v, nil
	}
	return "", fmt.Errorf("cannot tell which %s this binary was built with: set %s to Istio's CRD manifest", Module, Env)
}

// Path returns the manifest's path: $MESHPERF_ISTIO_CRDS, else ImagePath
// when it exists, else the file in the Go module cache (downloading the
// module there if needed, through `go mod download`).
func Path() (string, error) {
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", Env, p, err)
		}
		return p, nil
	}
	if _, err := os.Stat(ImagePath); err == nil {
		return ImagePath, nil
	}
	goBin, err := exec.LookPath("go")
	version, verr := Version()
	if verr != nil {
		return "", verr
	}
	if err != nil {
		return "", fmt.Errorf("no `go` on PATH to fetch Istio's CRDs from the Go module %s@%s: set %s to the manifest's path", Module, version, Env)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "mod", "download", "-json", Module+"@"+version)
	cmd.Stderr = &stderr
	// Outside any module, so that the download does not touch one.
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", Module, version, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v: %s", Module, version, err, bytes.TrimSpace(stderr.Bytes()))
	}
	p := filepath.Join(dl.Dir, File)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s@%s has no %s: %w", Module, version, File, err)
	}
	return p, nil
}
