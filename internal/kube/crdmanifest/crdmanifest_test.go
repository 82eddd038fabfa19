package crdmanifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Each manifest is found in the module cache at the version the binary was
// built with, and holds the kinds the pilot reads.
func TestPathFindsTheModulesManifest(t *testing.T) {
	for _, tc := range []struct {
		m     Manifest
		kinds []string
	}{
		{Istio, []string{"kind: VirtualService", "kind: Sidecar", "kind: PeerAuthentication"}},
		{GatewayAPI, []string{"kind: Gateway\n", "name: gateways.gateway.networking.k8s.io"}},
	} {
		t.Setenv(tc.m.Env, "")
		if _, err := os.Stat(tc.m.ImagePath); err == nil {
			t.Skipf("%s exists here: the lookup would take it", tc.m.ImagePath)
		}
		p, err := tc.m.Path()
		if err != nil {
			t.Fatal(err)
		}
		v, err := tc.m.Version()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, tc.m.Module+"@"+v) {
			t.Errorf("Path() = %s, want the file of %s@%s", p, tc.m.Module, v)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, kind := range tc.kinds {
			if !strings.Contains(string(data), kind) {
				t.Errorf("%s lacks %q", p, kind)
			}
		}
	}
}

func TestPathHonoursTheOverrideAndNamesAMissingFile(t *testing.T) {
	m := GatewayAPI
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	t.Setenv(m.Env, missing)
	if _, err := m.Path(); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Path() error = %v, want one naming %s", err, missing)
	}
	present := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(present, []byte("kind: CustomResourceDefinition\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(m.Env, present)
	if p, err := m.Path(); err != nil || p != present {
		t.Fatalf("Path() = %s, %v; want %s", p, err, present)
	}
}
