// Package version says which meshperf this is, for results and -version.
package version

import "runtime/debug"

// override is set at link time for releases: -ldflags "-X .../version.override=v1.2.3".
var override string

// String is meshperf's version: the release tag, else the module version, else the
// VCS revision the binary was built from, else "dev".
func String() string {
	if override != "" {
		return override
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return "dev"
}
