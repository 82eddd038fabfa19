package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long the cluster's certificates last: a test
// cluster lives minutes to days, and a longer life is no cost here.
const certValidity = 365 * 24 * time.Hour

// authority is a certificate authority that signs the cluster's
// certificates.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// newAuthority makes a self-signed CA.
func newAuthority(commonName string, now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: commonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

// certSpec is one certificate to issue. Kubernetes reads a client's user
// name from the common name and its groups from the organizations.
type certSpec struct {
	commonName string
	groups     []string
	dnsNames   []string
	ips        []net.IP
	client     bool
	server     bool
}

// keyPair is a certificate and its private key, PEM-encoded.
type keyPair struct {
	certPEM, keyPEM []byte
}

// issue signs a new key's certificate for spec.
func (a *authority) issue(spec certSpec, now time.Time) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.groups},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(certValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		DNSNames:    spec.dnsNames,
		IPAddresses: spec.ips,
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("certificate for %s: %w", spec.commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux (it would have to be
		// unreadable); a fixed serial is still a valid certificate.
		return big.NewInt(1)
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

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
var clientCerts = map[string]certSpec{
	"admin":              {commonName: adminUser, groups: []string{"system:masters"}, client: true},
	"controller-manager": {commonName: controllerManagerUser, client: true},
	"scheduler":          {commonName: schedulerUser, client: true},
	"kube-proxy":         {commonName: kubeProxyUser, client: true},
	"kubelet":            {commonName: nodeUser, groups: []string{"system:nodes"}, client: true},
	"coredns":            {commonName: coreDNSUser, client: true},
	// The kubelet authorizes the API server's logs/exec requests by asking
	// the API server itself (webhook); system:masters passes.
	"apiserver-kubelet-client": {commonName: apiserverKubeletUser, groups: []string{"system:masters"}, client: true},
}

// servingCerts are the serving certificates, by file name.
func servingCerts() map[string]certSpec {
	node := net.ParseIP(NodeIP)
	return map[string]certSpec{
		"apiserver": {commonName: "kube-apiserver", server: true,
			ips: []net.IP{node, net.ParseIP(APIServiceIP), net.IPv4(127, 0, 0, 1)},
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc." + ClusterDomain}},
		"kubelet-serving":            {commonName: nodeUser, groups: []string{"system:nodes"}, server: true, ips: []net.IP{node}, dnsNames: []string{NodeName}},
		"controller-manager-serving": {commonName: "kube-controller-manager", server: true, ips: []net.IP{node}},
		"scheduler-serving":          {commonName: "kube-scheduler", server: true, ips: []net.IP{node}},
	}
}

// writePKI writes the CA, every component's certificate and key, and the
// service-account signing key pair into dir.
func writePKI(dir string, now time.Time) (*authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := newAuthority("meshperf cluster CA", now)
	if err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"ca.crt": ca.certPEM, "ca.key": pemBlock("PRIVATE KEY", caKeyDER)}
	specs := servingCerts()
	for name, spec := range clientCerts {
		specs[name] = spec
	}
	for name, spec := range specs {
		kp, err := ca.issue(spec, now)
		if err != nil {
			return nil, err
		}
		files[name+".crt"], files[name+".key"] = kp.certPEM, kp.keyPEM
	}
	// Service-account tokens are signed with RSA, which every consumer of
	// the cluster's OIDC discovery document accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files["sa.key"] = pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))
	files["sa.pub"] = pemBlock("PUBLIC KEY", saPub)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return ca, nil
}
