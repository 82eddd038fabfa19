package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/template"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiserverURL is where every component reaches the API server.
var apiserverURL = "https://" + NodeIP + ":" + strconv.Itoa(apiserverPort)

// kubeconfigFor is a kubeconfig for the client certificate name (one of
// clientCerts), with the certificates embedded so that the file alone is
// enough to connect.
func kubeconfigFor(l layout, name string) (*clientcmdapi.Config, error) {
	read := func(file string) ([]byte, error) { return os.ReadFile(l.pki(file)) }
	ca, err := read("ca.crt")
	if err != nil {
		return nil, err
	}
	cert, err := read(name + ".crt")
	if err != nil {
		return nil, err
	}
	key, err := read(name + ".key")
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["meshperf"] = &clientcmdapi.Cluster{Server: apiserverURL, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["meshperf"] = &clientcmdapi.Context{Cluster: "meshperf", AuthInfo: name}
	cfg.CurrentContext = "meshperf"
	return cfg, nil
}

// writeKubeconfigs writes one kubeconfig per client certificate that a
// component connects with.
func writeKubeconfigs(l layout) error {
	if err := os.MkdirAll(l.path("kubeconfig"), 0o700); err != nil {
		return err
	}
	for name := range clientCerts {
		if name == "apiserver-kubelet-client" {
			continue
		}
		cfg, err := kubeconfigFor(l, name)
		if err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*cfg, l.kubeconfig(name)); err != nil {
			return err
		}
	}
	return nil
}

// configFiles renders every component's configuration file, by file name
// in the config directory.
func configFiles(l layout, pauseImage, runc string) (map[string][]byte, error) {
	files := map[string][]byte{}
	data := map[string]any{
		"NodeName": NodeName, "Runc": runc, "NodeIP": NodeIP, "PauseImage": pauseImage, "PodCIDR": PodCIDR, "PodGateway": PodGateway,
		"Range": Range, "Bridge": Bridge, "DNSServiceIP": DNSServiceIP, "ClusterDomain": ClusterDomain,
		"KubeletPort": kubeletPort, "KubeletHealthzPort": kubeletHealthzPort,
		"KubeProxyHealthz": kubeProxyHealthz, "KubeProxyMetrics": kubeProxyMetrics, "CoreDNSReadyPort": coreDNSReadyPort,
		"CA": l.pki("ca.crt"), "KubeletCert": l.pki("kubelet-serving.crt"), "KubeletKey": l.pki("kubelet-serving.key"),
		"ContainerdDir": l.containerdDir(), "ContainerdSocket": l.containerdSocket(), "CNIConfDir": l.cniConfDir(),
		"ResolvConf": l.config("resolv.conf"), "PodLogs": l.podLogs(), "CgroupRoot": "/" + CgroupName,
		"KubeProxyKubeconfig": l.kubeconfig("kube-proxy"), "CoreDNSKubeconfig": l.kubeconfig("coredns"),
	}
	for name, text := range templates {
		t, err := template.New(name).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		files[name] = b.Bytes()
	}
	cni, err := cniConfig(l)
	if err != nil {
		return nil, err
	}
	files["10-meshperf.conflist"] = cni
	return files, nil
}

// cniNetwork is the pods' network's name, which libcni's result cache
// outside the state directory names its files after (with the sandbox's
// id).
const cniNetwork = "meshperf"

// cniConfig is the pods' network: the bridge plugin with host-local
// addresses in PodCIDR. No masquerading and no default route: a pod
// reaches only 198.18.0.0/15, which the host blackholes beyond what it
// has, so no packet leaves the machine.
func cniConfig(l layout) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": PodGateway}}},
				"routes":  []map[string]string{{"dst": Range}},
				"dataDir": l.cniIPAMDir(),
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeConfigFiles writes configFiles into the config directory and the
// CNI configuration into containerd's CNI directory.
func writeConfigFiles(l layout, pauseImage, runc string) error {
	files, err := configFiles(l, pauseImage, runc)
	if err != nil {
		return err
	}
	for _, d := range []string{l.path("config"), l.cniConfDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for name, data := range files {
		path := l.config(name)
		if filepath.Ext(name) == ".conflist" {
			path = filepath.Join(l.cniConfDir(), name)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var templates = map[string]string{
	// containerd of its own: root, state, socket and CNI directories in the
	// state directory, so that a host's containerd (if any) is untouched;
	// the pods' network namespaces under its state and runc's root there
	// too, instead of /var/run/netns and /run/containerd/runc, so that
	// every mount the cluster makes is in the state directory.
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and runc
	// fails to create a sandbox whose oom_score_adj (-998) is below ours.
	"containerd.toml": `version = 2
root = "{{.ContainerdDir}}/root"
state = "{{.ContainerdDir}}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{{.ContainerdSocket}}"

[ttrpc]
  address = "{{.ContainerdSocket}}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.ContainerdDir}}/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.PauseImage}}"
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{{.CNIConfDir}}"

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  BinaryName = "{{.Runc}}"
  Root = "{{.ContainerdDir}}/runc"
`,
	// cgroupfs: cgroup v1 and no systemd here. cgroupRoot: the pods'
	// cgroups under one of the cluster's own, which Up creates and Down
	// removes, so that Down never touches a host's kubepods. failSwapOn false: a
	// developer's machine may have swap. Eviction thresholds absolute and
	// low: a percentage of a large shared disk (1% of 250 GB is 2.5 GB) can
	// exceed what a CI machine has free, and the node then evicts every pod
	// for disk pressure though the test's pods write almost nothing. Up
	// checks for minFreeDisk, well above these.
	"kubelet.yaml": `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.NodeIP}}
port: {{.KubeletPort}}
readOnlyPort: 0
healthzBindAddress: {{.NodeIP}}
healthzPort: {{.KubeletHealthzPort}}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {{.CA}}
authorization:
  mode: Webhook
tlsCertFile: {{.KubeletCert}}
tlsPrivateKeyFile: {{.KubeletKey}}
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
failSwapOn: false
containerRuntimeEndpoint: unix://{{.ContainerdSocket}}
clusterDNS:
- {{.DNSServiceIP}}
clusterDomain: {{.ClusterDomain}}
resolvConf: {{.ResolvConf}}
podLogsDir: {{.PodLogs}}
evictionHard:
  memory.available: 50Mi
  nodefs.available: 100Mi
  nodefs.inodesFree: "1000"
  imagefs.available: 100Mi
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`,
	// The pods' resolv.conf carries the host's search domains and name
	// servers unless the kubelet is given this: none leave the machine.
	"resolv.conf": "nameserver {{.DNSServiceIP}}\n",
	// Conntrack limits at zero: kube-proxy leaves the host's sysctls as
	// they are. No localhost node ports: they would need route_localnet.
	"kube-proxy.yaml": `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: {{.KubeProxyKubeconfig}}
hostnameOverride: {{.NodeName}}
bindAddress: {{.NodeIP}}
healthzBindAddress: {{.NodeIP}}:{{.KubeProxyHealthz}}
metricsBindAddress: {{.NodeIP}}:{{.KubeProxyMetrics}}
clusterCIDR: {{.PodCIDR}}
nodePortAddresses:
- {{.NodeIP}}/32
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`,
	// CoreDNS answers for the cluster's names only: no forward plugin, so
	// no query leaves the machine.
	"Corefile": `.:53 {
    bind {{.NodeIP}}
    errors
    ready {{.NodeIP}}:{{.CoreDNSReadyPort}}
    kubernetes {{.ClusterDomain}} in-addr.arpa {
        kubeconfig {{.CoreDNSKubeconfig}}
        pods insecure
    }
    cache 30
}
`,
}
