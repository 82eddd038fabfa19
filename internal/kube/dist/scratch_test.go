package dist

import (
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The scratch module keeps k8s.io/kubernetes's go and godebug lines and
// replaces exactly its staging modules with the published versions.
func TestScratchModuleReplacesTheStagingModules(t *testing.T) {
	k8s := `module k8s.io/kubernetes

go 1.24.0

godebug default=go1.24

require (
	k8s.io/api v0.0.0
	github.com/google/cadvisor v0.52.1
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/code-generator => ./staging/src/k8s.io/code-generator
	k8s.io/kubectl => ./staging/src/k8s.io/kubectl
	github.com/example/fork => github.com/example/fork v1.0.0
)
`
	f, err := modfile.Parse("go.mod", []byte(k8s), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := scratchModule(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := modfile.Parse("go.mod", out, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Go.Version != "1.24.0" || len(got.Godebug) != 1 || got.Godebug[0].Key != "default" || got.Godebug[0].Value != "go1.24" {
		t.Errorf("go/godebug lines not kept:\n%s", out)
	}
	if len(got.Require) != 1 || got.Require[0].Mod.Path != "k8s.io/kubernetes" || got.Require[0].Mod.Version != KubernetesVersion {
		t.Errorf("require:\n%s", out)
	}
	want := map[string]string{"k8s.io/api": "v0.33.13", "k8s.io/code-generator": codeGeneratorVersion, "k8s.io/kubectl": "v0.33.13"}
	if len(got.Replace) != len(want) {
		t.Errorf("replace:\n%s", out)
	}
	for _, r := range got.Replace {
		if want[r.Old.Path] != r.New.Version || r.New.Path != r.Old.Path {
			t.Errorf("replace %s => %s %s, want %s", r.Old.Path, r.New.Path, r.New.Version, want[r.Old.Path])
		}
	}
	if _, err := scratchModule(&modfile.File{}); err == nil || !strings.Contains(err.Error(), "not k8s.io/kubernetes") {
		t.Errorf("an empty go.mod: %v", err)
	}
}
