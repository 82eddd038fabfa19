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
	if c := Commit(); len(c) >= 12 {
		return "dev-" + c[:12]
	}
	return "dev"
}

// Commit is the full VCS revision the binary was built from, "" when the
// build did not record one (go run, a build outside a checkout).
func Commit() string { return buildSetting("vcs.revision") }

// Modified says the checkout had uncommitted changes when the binary was
// built: its results may not be reproducible from Commit alone.
func Modified() bool { return buildSetting("vcs.modified") == "true" }

func buildSetting(key string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
