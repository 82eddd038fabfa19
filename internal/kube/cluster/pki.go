package cluster

import (
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/kube/pki"
)

// certValidity is how long the cluster's certificates last: a test
// cluster lives minutes to days, and a longer life is no cost here.
const certValidity = 365 * 24 * time.Hour

// The identities of the cluster's components: who each is to the API
// server (user, groups) and what it serves.
const (
	adminUser             = "meshperf-admin"
	controllerManagerUser = "system:kube-controller-manager"
	schedulerUser         = "system:kube-scheduler"
	kubeProxyUser         = "system:kube-proxy"
	nodeUser              = "system:node:" + NodeName
	apiserverKubeletUser  = "kube-apiserver-kubelet-client"
	coreDNSUser           = "meshperf:coredns"
)

// clientCerts are the client certificates, by file name; each becomes a
// kubeconfig of the same name except the API server's, which it uses to
// reach kubelets.
var clientCerts = map[string]pki.CertSpec{
	"admin":              {CommonName: adminUser, Groups: []string{"system:masters"}, Client: true},
	"controller-manager": {CommonName: controllerManagerUser, Client: true},
	"scheduler":          {CommonName: schedulerUser, Client: true},
	"kube-proxy":         {CommonName: kubeProxyUser, Client: true},
	"kubelet":            {CommonName: nodeUser, Groups: []string{"system:nodes"}, Client: true},
	"coredns":            {CommonName: coreDNSUser, Client: true},
	// The kubelet authorizes the API server's logs/exec requests by asking
	// the API server itself (webhook); system:masters passes.
	"apiserver-kubelet-client": {CommonName: apiserverKubeletUser, Groups: []string{"system:masters"}, Client: true},
}

// servingCerts are the serving certificates, by file name.
func servingCerts() map[string]pki.CertSpec {
	node := net.ParseIP(NodeIP)
	return map[string]pki.CertSpec{
		"apiserver": {CommonName: "kube-apiserver", Server: true,
			IPs: []net.IP{node, net.ParseIP(APIServiceIP), net.IPv4(127, 0, 0, 1)},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc." + ClusterDomain}},
		"kubelet-serving":            {CommonName: nodeUser, Groups: []string{"system:nodes"}, Server: true, IPs: []net.IP{node}, DNSNames: []string{NodeName}},
		"controller-manager-serving": {CommonName: "kube-controller-manager", Server: true, IPs: []net.IP{node}},
		"scheduler-serving":          {CommonName: "kube-scheduler", Server: true, IPs: []net.IP{node}},
	}
}

// writePKI writes the CA, every component's certificate and key, and the
// service-account signing key pair into dir.
func writePKI(dir string, now time.Time) (*pki.Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewAuthority("meshperf cluster CA", now, certValidity)
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM, "ca.key": caKey}
	specs := servingCerts()
	for name, spec := range clientCerts {
		specs[name] = spec
	}
	for name, spec := range specs {
		kp, err := ca.Issue(spec, now)
		if err != nil {
			return nil, err
		}
		files[name+".crt"], files[name+".key"] = kp.CertPEM, kp.KeyPEM
	}
	if files["sa.key"], files["sa.pub"], err = pki.ServiceAccountKeys(); err != nil {
		return nil, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
