package results

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/meshperf/meshperf/internal/version"
)

// Provenance says what a result measured and where: without it two numbers
// in a store cannot be told apart from a regression. Every run (load, lab,
// cpload) carries one; the store keeps it in columns (provenanceColumns)
// so that history and the dashboard can filter on it.
type Provenance struct {
	// Meshperf is the meshperf that took the measurement.
	Meshperf Build `json:"meshperf"`
	// DataPlane is the proxy under test (meshperf-proxy, ztunnel, an
	// external mesh's); Name "" when the run had none (no-mesh).
	DataPlane Component `json:"data_plane"`
	// ControlPlane is the control plane under test (meshperf-pilot,
	// istiod); Name "" when the run had none.
	ControlPlane Component `json:"control_plane"`
	// ParamsHash identifies the parameters the scenario ran with
	// (ParamsHash()): equal hashes, same measurement.
	ParamsHash string `json:"params_hash,omitempty"`
	// Labels are the user's free-text labels for the run (Fortio's -labels).
	Labels  string  `json:"labels,omitempty"`
	Machine Machine `json:"machine"`
}

// Build is a build of meshperf: its version and the commit it came from.
type Build struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"` // built from a checkout with uncommitted changes
}

// Component is a part of the mesh under test, by name and version.
type Component struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
}

// String is "name version", or "none".
func (c Component) String() string {
	if c.Name == "" {
		return "none"
	}
	return strings.TrimSpace(c.Name + " " + c.Version)
}

// ThisBuild is the running meshperf's Build.
func ThisBuild() Build {
	return Build{Version: version.String(), Commit: version.Commit(), Modified: version.Modified()}
}

// ParamsHash is the first 16 hex digits of the SHA-256 of params' JSON
// encoding. encoding/json writes struct fields in declaration order and
// map keys sorted, so equal parameters hash equally; callers pass what
// defines the measurement (a scenario's matrix and settings, a load's
// flags), not where it was written.
func ParamsHash(params any) (string, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return "", fmt.Errorf("hash parameters: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// provenanceColumns are the store's provenance columns, the same in runs
// and cp_runs, in the order provenanceValues and scanProvenance use.
var provenanceColumns = []string{
	"meshperf_version", "meshperf_commit", "meshperf_modified",
	"data_plane", "data_plane_version", "data_plane_commit",
	"control_plane", "control_plane_version", "control_plane_commit",
	"params_hash", "labels",
	"machine_key", "machine_hostname", "machine_cpus", "machine_cpu_model", "machine_memory_mb", "machine_kernel",
}

// migrationProvenance (schema 3 -> 4) adds the provenance columns to runs
// and cp_runs. Rows stored before it keep their figures, with empty
// strings and zeros for what was not recorded.
var migrationProvenance = func() string {
	var b strings.Builder
	for _, table := range []string{"runs", "cp_runs"} {
		for _, c := range provenanceColumns {
			typ := "TEXT NOT NULL DEFAULT ''"
			if c == "meshperf_modified" || c == "machine_cpus" || c == "machine_memory_mb" {
				typ = "INTEGER NOT NULL DEFAULT 0"
			}
			fmt.Fprintf(&b, "ALTER TABLE %s ADD COLUMN %s %s;\n", table, c, typ)
		}
		fmt.Fprintf(&b, "CREATE INDEX %s_machine_labels ON %s(machine_key, labels);\n", table, table)
	}
	return b.String()
}()

func (p Provenance) values() []any {
	m := p.Machine
	return []any{
		p.Meshperf.Version, p.Meshperf.Commit, p.Meshperf.Modified,
		p.DataPlane.Name, p.DataPlane.Version, p.DataPlane.Commit,
		p.ControlPlane.Name, p.ControlPlane.Version, p.ControlPlane.Commit,
		p.ParamsHash, p.Labels,
		m.Key(), m.Hostname, m.CPUs, m.CPUModel, m.MemoryMB, m.Kernel,
	}
}

// scanTargets are the destinations for a row's provenance columns.
func (p *Provenance) scanTargets(machineKey *string) []any {
	m := &p.Machine
	return []any{
		&p.Meshperf.Version, &p.Meshperf.Commit, &p.Meshperf.Modified,
		&p.DataPlane.Name, &p.DataPlane.Version, &p.DataPlane.Commit,
		&p.ControlPlane.Name, &p.ControlPlane.Version, &p.ControlPlane.Commit,
		&p.ParamsHash, &p.Labels,
		machineKey, &m.Hostname, &m.CPUs, &m.CPUModel, &m.MemoryMB, &m.Kernel,
	}
}

// placeholders is "?,?,...,?" for n values.
func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
