package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"strings"
	"testing"
	"time"
)

// leafOf parses the workload's leaf certificate, the first in its chain.
func leafOf(t *testing.T, w *Workload) *x509.Certificate {
	t.Helper()
	certs, err := parseCerts(w.CertChainPEM)
	if err != nil || len(certs) == 0 {
		t.Fatalf("%s: no certificate in the chain: %v", w.SPIFFEID, err)
	}
	leaf := certs[0]
	return leaf
}

func TestIssue(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now))
	now := clock.Now()
	w, err := ca.Issue("bookinfo", "reviews")
	if err != nil {
		t.Fatal(err)
	}
	const want = "spiffe://cluster.local/ns/bookinfo/sa/reviews"
	if w.SPIFFEID != want {
		t.Errorf("SPIFFEID = %q, want %q", w.SPIFFEID, want)
	}
	if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, want, now); err != nil {
		t.Fatalf("issued certificate does not verify: %v", err)
	}
	if err := leafOf(t, w).CheckSignatureFrom(ca.Root()); err != nil {
		t.Errorf("not signed by the root: %v", err)
	}

	leaf := leafOf(t, w)
	if got := leaf.KeyUsage; got != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("KeyUsage = %b, want DigitalSignature|KeyEncipherment", got)
	}
	if !slices.Equal(leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ExtKeyUsage = %v, want ServerAuth, ClientAuth", leaf.ExtKeyUsage)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	if len(leaf.DNSNames) != 0 || len(leaf.IPAddresses) != 0 || leaf.Subject.String() != "" {
		t.Errorf("leaf carries more than the SPIFFE ID: subject %q, DNS %v, IP %v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
	}
	if !leaf.NotBefore.Equal(now.Add(-ClockSkewGrace)) {
		t.Errorf("NotBefore = %v, want now-%v", leaf.NotBefore, ClockSkewGrace)
	}
	if !leaf.NotAfter.Equal(now.Add(24*time.Hour)) || !w.NotAfter.Equal(leaf.NotAfter) {
		t.Errorf("NotAfter = %v (Workload %v), want now+24h", leaf.NotAfter, w.NotAfter)
	}
	if !w.RotateAt.Equal(now.Add(12 * time.Hour)) {
		t.Errorf("RotateAt = %v, want now+12h", w.RotateAt)
	}
	if w.Identity != (Identity{"bookinfo", "reviews"}) || !w.IssuedAt.Equal(now) {
		t.Errorf("Identity/IssuedAt = %v/%v", w.Identity, w.IssuedAt)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("leaf key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	if !strings.HasPrefix(string(w.KeyPEM), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("key is not PKCS#8 PEM: %.40q", w.KeyPEM)
	}
	// The pair must load the way a TLS stack loads it: key matching the leaf.
	if _, err := tls.X509KeyPair(w.CertChainPEM, w.KeyPEM); err != nil {
		t.Errorf("certificate and key do not form a pair: %v", err)
	}

	again, err := ca.Issue("bookinfo", "reviews")
	if err != nil {
		t.Fatal(err)
	}
	if leafOf(t, again).SerialNumber.Cmp(leaf.SerialNumber) == 0 || string(again.KeyPEM) == string(w.KeyPEM) {
		t.Error("Issue reused the serial number or key")
	}
}

func TestIssueNeverOutlivesRoot(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now), WithRootCertTTL(10*time.Hour))
	w, err := ca.Issue("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	if !w.NotAfter.Equal(ca.Root().NotAfter) {
		t.Errorf("NotAfter = %v, want the root's %v", w.NotAfter, ca.Root().NotAfter)
	}
	if want := clock.Now().Add(5 * time.Hour); !w.RotateAt.Equal(want) {
		t.Errorf("RotateAt = %v, want half the capped lifetime, %v", w.RotateAt, want)
	}
}

func TestIssueRejectsBadIdentity(t *testing.T) {
	ca := mustOpen(t, t.TempDir())
	cases := []struct{ ns, sa, want string }{
		{"", "sleep", `namespace ""`},
		{"Default", "sleep", `namespace "Default"`},
		{"a/b", "sleep", `namespace "a/b"`},
		{strings.Repeat("n", 64), "sleep", "namespace"},
		{"default", "", `service account ""`},
		{"default", "x/../y", `service account "x/../y"`},
		{"default", "Sleep", `service account "Sleep"`},
	}
	for _, tc := range cases {
		_, err := ca.Issue(tc.ns, tc.sa)
		checkOneLine(t, err, tc.want)
		_, err = ca.Get(tc.ns, tc.sa)
		checkOneLine(t, err, tc.want)
	}
	if !ca.NextRotation().IsZero() {
		t.Error("a rejected identity was cached")
	}
	// A service account may contain dots, as Kubernetes allows.
	if _, err := ca.Issue("default", "my.sa"); err != nil {
		t.Errorf("dotted service account rejected: %v", err)
	}
}

func TestKeyAlgorithms(t *testing.T) {
	cases := []struct {
		alg   KeyAlgorithm
		check func(any) bool
	}{
		{ECDSAP384, func(k any) bool { p, ok := k.(*ecdsa.PublicKey); return ok && p.Curve == elliptic.P384() }},
		{RSA2048, func(k any) bool { p, ok := k.(*rsa.PublicKey); return ok && p.N.BitLen() == 2048 }},
	}
	for _, tc := range cases {
		t.Run(string(tc.alg), func(t *testing.T) {
			ca := mustOpen(t, t.TempDir(), WithKeyAlgorithm(tc.alg))
			if !tc.check(ca.Root().PublicKey) {
				t.Errorf("root key is %T, want %s", ca.Root().PublicKey, tc.alg)
			}
			w, err := ca.Issue("default", "sleep")
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(leafOf(t, w).PublicKey) {
				t.Errorf("leaf key is %T, want %s", leafOf(t, w).PublicKey, tc.alg)
			}
			if _, err := tls.X509KeyPair(w.CertChainPEM, w.KeyPEM); err != nil {
				t.Error(err)
			}
			if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestVerifyWorkloadRejects(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now))
	other := mustOpen(t, t.TempDir())
	w, err := ca.Issue("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, now); err != nil {
		t.Fatalf("control case fails: %v", err)
	}
	cases := []struct {
		name        string
		root, chain []byte
		spiffe      string
		at          time.Time
		want        string
	}{
		{"other SA", ca.RootPEM(), w.CertChainPEM, "spiffe://cluster.local/ns/default/sa/other", now, "want exactly"},
		{"other root", other.RootPEM(), w.CertChainPEM, w.SPIFFEID, now, "unknown authority"},
		{"expired", ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, w.NotAfter.Add(time.Second), "expired"},
		{"before skew grace", ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, now.Add(-ClockSkewGrace - time.Second), "expired or is not yet valid"},
		{"a key for a chain", ca.RootPEM(), w.KeyPEM, w.SPIFFEID, now, "want CERTIFICATE"},
		{"no root", nil, w.CertChainPEM, w.SPIFFEID, now, "root: no PEM certificate"},
		{"root as leaf", ca.RootPEM(), ca.RootPEM(), w.SPIFFEID, now, "is a CA"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkOneLine(t, VerifyWorkload(tc.root, tc.chain, tc.spiffe, tc.at), tc.want)
		})
	}
	// Within the skew grace, a proxy whose clock is behind still accepts it.
	if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, now.Add(-time.Minute)); err != nil {
		t.Errorf("certificate rejected by a clock one minute behind: %v", err)
	}
}

func TestIssueServingHasDNSNamesAndSPIFFE(t *testing.T) {
	ca, err := Open(t.TempDir(), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ca.IssueServing("istio-system", "istiod", "istiod.istio-system.svc", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	if err := leafOf(t, w).VerifyHostname("istiod.istio-system.svc"); err != nil {
		t.Error(err)
	}
	if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, "spiffe://cluster.local/ns/istio-system/sa/istiod", time.Now()); err != nil {
		t.Error(err)
	}
	if _, err := ca.IssueServing("", "istiod"); err == nil {
		t.Error("an empty namespace was accepted")
	}
}
