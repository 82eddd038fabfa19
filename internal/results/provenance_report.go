package results

import (
	"fmt"
	"strings"
)

// RunsProvenance is what a set of runs says about where it came from, for
// the report's header and the summary's provenance line: each distinct
// value once, in the order the runs first give it. More than one value in
// a field (two builds, two machines) is worth seeing before comparing.
type RunsProvenance struct {
	Meshperf      []string // "dev-55537af7e2c3 (commit 55537af7e2c3, modified)"
	DataPlanes    []string // "meshperf-proxy 0.1.0 (commit 55537af7e2c3): server-sidecar, both-sidecars"
	ControlPlanes []string // as DataPlanes
	ParamsHashes  []string
	Labels        []string
	Machines      []string // Machine.String()
}

// ProvenanceOf gathers runs' provenance. Runs stored before provenance was
// recorded add nothing.
func ProvenanceOf(runs []Run) RunsProvenance {
	var p RunsProvenance
	var data, control componentModes
	for _, r := range runs {
		pr := r.Provenance
		if pr.Meshperf.Version != "" {
			p.Meshperf = appendNew(p.Meshperf, pr.Meshperf.String())
		}
		if pr.Meshperf.Version != "" || pr.DataPlane.Name != "" {
			data.add(pr.DataPlane, r.Mode)
			control.add(pr.ControlPlane, r.Mode)
		}
		if pr.ParamsHash != "" {
			p.ParamsHashes = appendNew(p.ParamsHashes, pr.ParamsHash)
		}
		if pr.Labels != "" {
			p.Labels = appendNew(p.Labels, pr.Labels)
		}
		if m := pr.Machine.String(); m != "" {
			p.Machines = appendNew(p.Machines, m)
		}
	}
	p.DataPlanes, p.ControlPlanes = data.lines(), control.lines()
	return p
}

// Line is the provenance in one line, "" when the runs recorded none.
func (p RunsProvenance) Line() string {
	var parts []string
	add := func(what string, v []string) {
		if len(v) > 0 {
			parts = append(parts, what+" "+strings.Join(v, "; "))
		}
	}
	add("meshperf", p.Meshperf)
	add("data plane", p.DataPlanes)
	add("control plane", p.ControlPlanes)
	add("params", p.ParamsHashes)
	add("labels", p.Labels)
	add("machine", p.Machines)
	return strings.Join(parts, " | ")
}

// String is "VERSION (commit SHORT[, modified])", or the version alone
// when the build recorded no commit.
func (b Build) String() string {
	if b.Commit == "" {
		return b.Version
	}
	s := b.Version + " (commit " + shortCommit(b.Commit)
	if b.Modified {
		s += ", modified"
	}
	return s + ")"
}

// Describe is String with the commit: "meshperf-proxy 0.1.0 (commit
// 55537af7e2c3-dirty)", or "none".
func (c Component) Describe() string {
	if c.Commit == "" {
		return c.String()
	}
	return fmt.Sprintf("%s (commit %s)", c.String(), shortCommit(c.Commit))
}

// shortCommit is a commit's first 12 hex digits, keeping a "-dirty" suffix.
func shortCommit(c string) string {
	hex, dirty := strings.CutSuffix(c, "-dirty")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	if dirty {
		hex += "-dirty"
	}
	return hex
}

// componentModes lists each component with the modes that ran it.
type componentModes struct {
	order []string
	modes map[string][]string
}

func (c *componentModes) add(comp Component, mode string) {
	d := comp.Describe()
	if c.modes == nil {
		c.modes = map[string][]string{}
	}
	if _, ok := c.modes[d]; !ok {
		c.order = append(c.order, d)
	}
	if mode != "" {
		c.modes[d] = appendNew(c.modes[d], mode)
	}
}

func (c *componentModes) lines() []string {
	var out []string
	for _, d := range c.order {
		if m := c.modes[d]; len(m) > 0 {
			d += " in " + strings.Join(m, ", ")
		}
		out = append(out, d)
	}
	return out
}

func appendNew(list []string, v string) []string {
	if contains(list, v) {
		return list
	}
	return append(list, v)
}
