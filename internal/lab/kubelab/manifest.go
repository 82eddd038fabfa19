package kubelab

import (
	"bytes"
	"fmt"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// ManifestRunID names the namespace of a rendered manifest
// (meshperf-lab-render), which no run generates (run ids are random).
const ManifestRunID = "render"

// Manifest renders the objects of each of s's modes, in the order the
// matrix runs them, as kubectl would serialise them: one YAML stream per
// mode after a `# mode: NAME` comment, with images from repo ("" for the
// node's imported ones).
func Manifest(s *scenario.Scenario, mesh Mesh, repo string) ([]byte, error) {
	if err := CheckModes(s, mesh); err != nil {
		return nil, err
	}
	r := Config{RunID: ManifestRunID, ImageRepo: repo, Mesh: mesh}.render()
	var out bytes.Buffer
	seen := map[scenario.Mode]bool{}
	for _, spec := range s.Expand() {
		if seen[spec.Mode] {
			continue
		}
		seen[spec.Mode] = true
		fmt.Fprintf(&out, "# mode: %s (mesh %s, mtls %t)\n", spec.Mode, mesh, spec.MTLS)
		for i, obj := range r.Objects(spec).List() {
			b, err := inject.ObjectYAML(obj)
			if err != nil {
				return nil, fmt.Errorf("manifest: %w", err)
			}
			if i > 0 {
				out.WriteString("---\n")
			}
			out.Write(b)
		}
		out.WriteString("---\n")
	}
	return out.Bytes(), nil
}
