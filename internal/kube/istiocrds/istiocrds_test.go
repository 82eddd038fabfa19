package istiocrds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The manifest is found in the module cache at the version the binary was
// built with, and holds the kinds the pilot reads.
func TestPathFindsTheModulesManifest(t *testing.T) {
	t.Setenv(Env, "")
	if _, err := os.Stat(ImagePath); err == nil {
		t.Skipf("%s exists here: the lookup would take it", ImagePath)
	}
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	v, err := Version()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, Module+"@"+v) {
		t.Errorf("Path() = %s, want the file of %s@%s", p, Module, v)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"kind: VirtualService", "kind: Sidecar", "kind: PeerAuthentication"} {
		if !strings.Contains(string(data), kind) {
			t.Errorf("%s lacks %q", p, kind)
		}
	}
}

func TestPathHonoursTheOverrideAndNamesAMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	t.Setenv(Env, missing)
	if _, err := Path(); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Path() error = %v, want one naming %s", err, missing)
	}
	present := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(present, []byte("kind: CustomResourceDefinition\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(Env, present)
	if p, err := Path(); err != nil || p != present {
		t.Fatalf("Path() = %s, %v; want %s", p, err, present)
	}
}
