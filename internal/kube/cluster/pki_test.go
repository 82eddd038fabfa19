package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

// Every certificate chains to the cluster's CA for its use, and carries the
// identity the API server and the kubelet read from it.
func TestPKIChainsNamesAndGroups(t *testing.T) {
	dir := t.TempDir()
	if _, err := writePKI(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if !ca.IsCA {
		t.Fatal("ca.crt is not a CA")
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for name, spec := range clientCerts {
		c := readCert(t, filepath.Join(dir, name+".crt"))
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: client certificate does not verify: %v", name, err)
		}
		if c.Subject.CommonName != spec.CommonName || !slices.Equal(c.Subject.Organization, spec.Groups) {
			t.Errorf("%s: user %q groups %v, want %q %v", name, c.Subject.CommonName, c.Subject.Organization, spec.CommonName, spec.Groups)
		}
	}
	want := map[string]struct {
		user   string
		groups []string
	}{
		"admin":   {adminUser, []string{"system:masters"}},
		"kubelet": {"system:node:" + NodeName, []string{"system:nodes"}},
	}
	for name, w := range want {
		c := readCert(t, filepath.Join(dir, name+".crt"))
		if c.Subject.CommonName != w.user || !slices.Equal(c.Subject.Organization, w.groups) {
			t.Errorf("%s is %q in %v, want %q in %v", name, c.Subject.CommonName, c.Subject.Organization, w.user, w.groups)
		}
	}
	api := readCert(t, filepath.Join(dir, "apiserver.crt"))
	for _, host := range []string{NodeIP, APIServiceIP, "kubernetes.default.svc." + ClusterDomain, "kubernetes.default"} {
		if _, err := api.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the API server's certificate is not valid for %s: %v", host, err)
		}
	}
	if err := api.VerifyHostname("198.18.0.2"); err == nil {
		t.Error("the API server's certificate is valid for an address it does not serve")
	}
	kubelet := readCert(t, filepath.Join(dir, "kubelet-serving.crt"))
	if !slices.ContainsFunc(kubelet.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP(NodeIP)) }) {
		t.Errorf("the kubelet's serving certificate has IPs %v, not the node's %s", kubelet.IPAddresses, NodeIP)
	}
	if _, err := kubelet.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a serving certificate is accepted as a client certificate")
	}
	for _, f := range []string{"sa.key", "sa.pub", "ca.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
}
