package cluster

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestConfigFilesCarryTheFixesAndAddresses(t *testing.T) {
	l := layout{"/state"}
	files, err := configFiles(l, "meshperf.local/pause:v1", "/usr/sbin/runc")
	if err != nil {
		t.Fatal(err)
	}
	var kubelet map[string]any
	if err := yaml.UnmarshalStrict(files["kubelet.yaml"], &kubelet); err != nil {
		t.Fatalf("kubelet.yaml: %v\n%s", err, files["kubelet.yaml"])
	}
	for key, want := range map[string]any{
		"cgroupDriver": "cgroupfs", "failSwapOn": false, "address": NodeIP, "readOnlyPort": float64(0),
		"containerRuntimeEndpoint": "unix:///state/containerd/containerd.sock", "resolvConf": "/state/config/resolv.conf",
		// Its pods' cgroups under the cluster's own, never a host's kubepods.
		"cgroupRoot": "/" + CgroupName,
	} {
		if kubelet[key] != want {
			t.Errorf("kubelet.yaml %s = %v, want %v", key, kubelet[key], want)
		}
	}
	if dns, _ := kubelet["clusterDNS"].([]any); len(dns) != 1 || dns[0] != DNSServiceIP {
		t.Errorf("kubelet.yaml clusterDNS = %v, want [%s]", kubelet["clusterDNS"], DNSServiceIP)
	}

	var proxy map[string]any
	if err := yaml.UnmarshalStrict(files["kube-proxy.yaml"], &proxy); err != nil {
		t.Fatalf("kube-proxy.yaml: %v", err)
	}
	if proxy["mode"] != "iptables" || proxy["hostnameOverride"] != NodeName || proxy["clusterCIDR"] != PodCIDR {
		t.Errorf("kube-proxy.yaml: %v", proxy)
	}

	toml := string(files["containerd.toml"])
	for _, want := range []string{
		`sandbox_image = "meshperf.local/pause:v1"`, "restrict_oom_score_adj = true", "SystemdCgroup = false", `BinaryName = "/usr/sbin/runc"`,
		`address = "/state/containerd/containerd.sock"`, `conf_dir = "/state/cni/net.d"`, `root = "/state/containerd/root"`,
		// Its mounts and runc's state in the state directory, not a host
		// runtime's /var/run/netns and /run/containerd/runc.
		"netns_mounts_under_state_dir = true", `Root = "/state/containerd/runc"`,
	} {
		if !strings.Contains(toml, want) {
			t.Errorf("containerd.toml lacks %s:\n%s", want, toml)
		}
	}

	corefile := string(files["Corefile"])
	if strings.Contains(corefile, "forward") || !strings.Contains(corefile, "bind "+NodeIP) {
		t.Errorf("Corefile must bind the node IP and forward nowhere:\n%s", corefile)
	}

	var cni struct {
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Ranges [][]struct{ Subnet, Gateway string } `json:"ranges"`
				Routes []struct{ Dst string }               `json:"routes"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(files["10-meshperf.conflist"], &cni); err != nil {
		t.Fatal(err)
	}
	p := cni.Plugins[0]
	if p.Type != "bridge" || p.Bridge != Bridge || p.IPMasq {
		t.Errorf("CNI plugin: %+v", p)
	}
	if r := p.IPAM.Ranges; len(r) != 1 || r[0][0].Subnet != PodCIDR || r[0][0].Gateway != PodGateway {
		t.Errorf("CNI ranges: %+v", r)
	}
	// Only the benchmarking range: no default route, so nothing leaves.
	if r := p.IPAM.Routes; len(r) != 1 || r[0].Dst != Range {
		t.Errorf("CNI routes: %+v, want only %s", r, Range)
	}
}
