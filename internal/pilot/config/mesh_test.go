package config

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	meshconfig "istio.io/api/mesh/v1alpha1"
)

func TestDefaultMeshConfig(t *testing.T) {
	for _, path := range []string{"", writeTemp(t, "empty.yaml", "# nothing set\n")} {
		mc, err := LoadMeshConfig(path)
		if err != nil {
			t.Fatalf("LoadMeshConfig(%q): %v", path, err)
		}
		if mc.RootNamespace != "istio-system" || mc.TrustDomain != "cluster.local" ||
			mc.OutboundTrafficPolicy.GetMode() != meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY ||
			len(mc.DiscoverySelectors) != 0 {
			t.Errorf("LoadMeshConfig(%q) defaults wrong: %v", path, mc)
		}
		if err := ValidateMeshConfig(mc); err != nil {
			t.Errorf("defaults do not validate: %v", err)
		}
	}
}

func TestLoadMeshConfigOverrides(t *testing.T) {
	mc, err := LoadMeshConfig("testdata/mesh/full.good.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if mc.RootNamespace != "mesh-root" || mc.TrustDomain != "example.org" ||
		mc.OutboundTrafficPolicy.GetMode() != meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY {
		t.Errorf("overrides not applied: %v", mc)
	}
	if len(mc.DiscoverySelectors) != 2 || mc.DiscoverySelectors[1].MatchExpressions[0].Values[1] != "yes" {
		t.Errorf("discoverySelectors = %v", mc.DiscoverySelectors)
	}
	if mc.EnableTracing || mc.ConnectTimeout.AsDuration().Seconds() != 5 {
		t.Errorf("explicit false/duration not applied: tracing %v, connectTimeout %v", mc.EnableTracing, mc.ConnectTimeout)
	}
	if mc.ProxyListenPort != 15001 || mc.IngressClass != "istio" {
		t.Errorf("defaults of unset fields lost: %v", mc)
	}
}

// An explicitly written zero value overrides a non-zero default, and an empty
// nested message keeps the default's fields, as in istiod.
func TestLoadMeshConfigMerge(t *testing.T) {
	mc, err := ParseMeshConfig([]byte("outboundTrafficPolicy: {}\nproxyListenPort: 15101\n"))
	if err != nil {
		t.Fatal(err)
	}
	if mc.OutboundTrafficPolicy.GetMode() != meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY {
		t.Errorf("empty outboundTrafficPolicy lost the ALLOW_ANY default")
	}
	if mc.ProxyListenPort != 15101 {
		t.Errorf("proxyListenPort = %d, want 15101", mc.ProxyListenPort)
	}
	mc, err = ParseMeshConfig([]byte("outboundTrafficPolicy: {mode: REGISTRY_ONLY}\nenableTracing: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if mc.OutboundTrafficPolicy.GetMode() != meshconfig.MeshConfig_OutboundTrafficPolicy_REGISTRY_ONLY || mc.EnableTracing {
		t.Errorf("zero values did not override defaults: %v", mc)
	}
	if DefaultMeshConfig().OutboundTrafficPolicy.GetMode() != meshconfig.MeshConfig_OutboundTrafficPolicy_ALLOW_ANY {
		t.Error("loading changed the defaults")
	}
}

// TestMeshConfigBadFiles walks testdata/mesh/*.bad.yaml; each file's first
// line is "# error: SUBSTRING".
func TestMeshConfigBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/mesh/*.bad.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/mesh/*.bad.yaml files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := expectedError(t, f)
			mc, err := LoadMeshConfig(f)
			if err == nil {
				t.Fatalf("loaded %v, want error containing %q", mc, want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, f+": ") || strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
				t.Errorf("error\n  %s\nwant one line starting with the file name and containing\n  %s", msg, want)
			}
		})
	}
}

func TestLoadMeshConfigMissingFile(t *testing.T) {
	if _, err := LoadMeshConfig("testdata/mesh/nope.yaml"); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("got %v, want an error naming the file", err)
	}
}

func expectedError(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first, _ := bufio.NewReader(f).ReadString('\n')
	want, ok := strings.CutPrefix(strings.TrimSpace(first), "# error: ")
	if !ok || want == "" {
		t.Fatalf("first line must be \"# error: SUBSTRING\", got %q", first)
	}
	return want
}

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
