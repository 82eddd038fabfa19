package results

// The names results give meshperf's own mesh components.
const (
	ComponentProxy = "meshperf-proxy"
	ComponentPilot = "meshperf-pilot"
)

// Component is b as a part of the mesh under test (meshperf pilot is part
// of meshperf's binary): its version, and its commit with "-dirty" when the
// checkout had uncommitted changes, as ztunnel and meshperf-proxy write it.
func (b Build) Component(name string) Component {
	c := Component{Name: name, Version: b.Version, Commit: b.Commit}
	if b.Modified && c.Commit != "" {
		c.Commit += "-dirty"
	}
	return c
}

// ExternalMesh is the component a user names with -mesh-name and
// -mesh-version (istio 1.24.0): what meshperf cannot ask a binary for. An
// empty name is none, whatever the version.
func ExternalMesh(name, version string) Component {
	if name == "" {
		return Component{}
	}
	return Component{Name: name, Version: version}
}
