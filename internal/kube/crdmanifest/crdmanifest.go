// Package crdmanifest finds the CustomResourceDefinitions the pilot
// installs, as their projects publish them, at the versions this binary
// decodes their kinds with (so that the schemas a cluster validates against
// are the ones meshperf reads): Istio's, the manifest
// kubernetes/customresourcedefinitions.gen.yaml of the istio.io/api
// module, and the Gateway API's Gateway (waypoints are Gateways), from the
// sigs.k8s.io/gateway-api module's standard channel.
//
// Why not embed them: they are other projects' generated files, and this
// project commits nothing taken from another repository. A machine that
// builds meshperf has the modules in its Go module cache; the images carry
// the manifests at each one's ImagePath.
package crdmanifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	// Linked so that the build information of every binary that uses this
	// package names the modules' versions.
	_ "istio.io/api/networking/v1alpha3"
	_ "sigs.k8s.io/gateway-api/apis/v1"
)

// Manifest is one published CRD manifest: the Go module and the file in it,
// the variable that overrides the lookup, and where meshperf's images carry
// it.
type Manifest struct {
	What      string // what it holds, for messages
	Module    string
	File      string
	Env       string
	ImagePath string
}

// Istio is Istio's CRDs, every kind the pilot reads from Istio's groups.
var Istio = Manifest{
	What:      "Istio's CRDs",
	Module:    "istio.io/api",
	File:      "kubernetes/customresourcedefinitions.gen.yaml",
	Env:       "MESHPERF_ISTIO_CRDS",
	ImagePath: "/usr/share/meshperf/istio-crds.yaml",
}

// GatewayAPI is the Gateway API's Gateway CRD, the kind that declares a
// waypoint, from the standard channel (the one Istio's documentation
// installs).
var GatewayAPI = Manifest{
	What:      "the Gateway API's Gateway CRD",
	Module:    "sigs.k8s.io/gateway-api",
	File:      "config/crd/standard/gateway.networking.k8s.io_gateways.yaml",
	Env:       "MESHPERF_GATEWAY_API_CRDS",
	ImagePath: "/usr/share/meshperf/gateway-api-crds.yaml",
}

// Version is the module version this binary was built with. A test
// binary's build information lists no modules, so there it is the version
// the enclosing module requires (`go list -m`, run where the test runs).
func (m Manifest) Version() (string, error) {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == m.Module {
				if d.Replace != nil {
					return d.Replace.Version, nil
				}
				return d.Version, nil
			}
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", m.Module).Output()
	if v := string(bytes.TrimSpace(out)); err == nil && v != "" {
		return v, nil
	}
	return "", fmt.Errorf("cannot tell which %s this binary was built with: set %s to the manifest of %s", m.Module, m.Env, m.What)
}

// Path returns the manifest's path: $Env, else ImagePath when it exists,
// else the file in the Go module cache (downloading the module there if
// needed, through `go mod download`).
func (m Manifest) Path() (string, error) {
	if p := os.Getenv(m.Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", m.Env, p, err)
		}
		return p, nil
	}
	if _, err := os.Stat(m.ImagePath); err == nil {
		return m.ImagePath, nil
	}
	goBin, err := exec.LookPath("go")
	version, verr := m.Version()
	if verr != nil {
		return "", verr
	}
	if err != nil {
		return "", fmt.Errorf("no `go` on PATH to fetch %s from the Go module %s@%s: set %s to the manifest's path", m.What, m.Module, version, m.Env)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "mod", "download", "-json", m.Module+"@"+version)
	cmd.Stderr = &stderr
	// Outside any module, so that the download does not touch one.
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", m.Module, version, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v: %s", m.Module, version, err, bytes.TrimSpace(stderr.Bytes()))
	}
	p := filepath.Join(dl.Dir, m.File)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s@%s has no %s: %w", m.Module, version, m.File, err)
	}
	return p, nil
}
