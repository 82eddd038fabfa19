package ca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
)

const testTD = "cluster.local"

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func mustOpen(t testing.TB, dir string, opts ...Option) *CA {
	t.Helper()
	ca, err := Open(dir, testTD, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return ca
}

// checkOneLine fails unless err is non-nil, one line, and mentions every want.
func checkOneLine(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one mentioning %q", want)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

func TestOpenCreatesRoot(t *testing.T) {
	clock := newFakeClock()
	dir := filepath.Join(t.TempDir(), "nested", "ca")
	ca := mustOpen(t, dir, WithClock(clock.Now))

	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode = %o, want 700", got)
	}
	for _, name := range []string{RootCertFile, RootKeyFile} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", name, got)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, RootCertFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, ca.RootPEM()) {
		t.Error("RootPEM differs from root-cert.pem")
	}

	root := ca.Root()
	if !root.IsCA || !root.BasicConstraintsValid {
		t.Error("root is not a CA")
	}
	if root.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Error("root lacks keyCertSign")
	}
	if err := root.CheckSignatureFrom(root); err != nil {
		t.Errorf("root is not self-signed: %v", err)
	}
	if got := root.Subject.Organization; len(got) != 1 || got[0] != testTD {
		t.Errorf("root O = %v, want [%s] as istiod writes it", got, testTD)
	}
	pub, ok := root.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("root key is %T, want ECDSA P-256", root.PublicKey)
	}
	now := clock.Now()
	if !root.NotAfter.Equal(now.Add(3650 * 24 * time.Hour)) {
		t.Errorf("root NotAfter = %v, want now+3650d", root.NotAfter)
	}
	if !root.NotBefore.Equal(now.Add(-ClockSkewGrace)) {
		t.Errorf("root NotBefore = %v, want now-%v", root.NotBefore, ClockSkewGrace)
	}
	if ca.TrustDomain() != testTD {
		t.Errorf("TrustDomain = %q", ca.TrustDomain())
	}
}

func TestReopenKeepsRoot(t *testing.T) {
	dir := t.TempDir()
	first := mustOpen(t, dir)
	w, err := first.Issue("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	second := mustOpen(t, dir, WithKeyAlgorithm(RSA2048)) // a new algorithm must not touch the existing root
	if !bytes.Equal(first.RootPEM(), second.RootPEM()) {
		t.Fatal("reopening created a different root")
	}
	if err := VerifyWorkload(second.RootPEM(), w.CertChainPEM, w.SPIFFEID, time.Now()); err != nil {
		t.Errorf("certificate from the first open does not verify against the reopened root: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want only the two root files", names)
	}
}

// writeRootFiles writes a CA certificate and key in the given encodings,
// standing in for roots made by openssl or istiod.
func writeRootFiles(t *testing.T, dir string, key any, keyPEM *pem.Block, isCA bool, notAfter time.Time) {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{Organization: []string{testTD}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  isCA,
	}
	var der []byte
	var err error
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	case *rsa.PrivateKey:
		der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RootCertFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RootKeyFile), pem.EncodeToMemory(keyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOpenLoadsOtherKeyEncodings(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	sec1, _ := x509.MarshalECPrivateKey(ec)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	cases := map[string]struct {
		key   any
		block *pem.Block
	}{
		"SEC1 EC":      {ec, &pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}},
		"PKCS#1 RSA":   {rsaKey, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}},
		"PKCS#8 RSA":   {rsaKey, &pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(rsaKey))}},
		"PKCS#8 ECDSA": {ec, &pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(ec))}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeRootFiles(t, dir, tc.key, tc.block, true, time.Now().Add(time.Hour*24*365))
			ca := mustOpen(t, dir)
			w, err := ca.Issue("default", "sleep")
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyWorkload(ca.RootPEM(), w.CertChainPEM, w.SPIFFEID, time.Now()); err != nil {
				t.Error(err)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestOpenRejectsBadRoot(t *testing.T) {
	other := t.TempDir()
	mustOpen(t, other)
	otherKey, _ := os.ReadFile(filepath.Join(other, RootKeyFile))
	otherCert, _ := os.ReadFile(filepath.Join(other, RootCertFile))

	cases := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		file    string // the file the error must name
		want    string
	}{
		{"garbage certificate", func(t *testing.T, dir string) {
			write(t, dir, RootCertFile, []byte("not a certificate\n"))
		}, RootCertFile, "no PEM data"},
		{"garbage key", func(t *testing.T, dir string) {
			write(t, dir, RootKeyFile, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
		}, RootKeyFile, "does not parse"},
		{"truncated key", func(t *testing.T, dir string) {
			b := read(t, dir, RootKeyFile)
			write(t, dir, RootKeyFile, b[:len(b)/2])
		}, RootKeyFile, "no PEM data"},
		{"second block after the key", func(t *testing.T, dir string) {
			write(t, dir, RootKeyFile, append(read(t, dir, RootKeyFile), otherKey...))
		}, RootKeyFile, "after the first PEM block"},
		{"key of another root", func(t *testing.T, dir string) {
			write(t, dir, RootKeyFile, otherKey)
		}, RootKeyFile, "does not match"},
		{"certificate of another root", func(t *testing.T, dir string) {
			write(t, dir, RootCertFile, otherCert)
		}, RootKeyFile, "does not match"},
		{"key where the certificate belongs", func(t *testing.T, dir string) {
			write(t, dir, RootCertFile, otherKey)
		}, RootCertFile, "want CERTIFICATE"},
		{"key missing", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, RootKeyFile)); err != nil {
				t.Fatal(err)
			}
		}, RootKeyFile, "is missing"},
		{"not a CA", func(t *testing.T, dir string) {
			ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			der, _ := x509.MarshalECPrivateKey(ec)
			writeRootFiles(t, dir, ec, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}, false, time.Now().Add(time.Hour))
		}, RootCertFile, "not a CA"},
		{"expired", func(t *testing.T, dir string) {
			ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			der, _ := x509.MarshalECPrivateKey(ec)
			writeRootFiles(t, dir, ec, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}, true, time.Now().Add(-time.Minute))
		}, RootCertFile, "expired"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustOpen(t, dir)
			tc.corrupt(t, dir)
			before := snapshot(t, dir)
			_, err := Open(dir, testTD)
			checkOneLine(t, err, filepath.Join(dir, tc.file), tc.want)
			if after := snapshot(t, dir); after != before {
				t.Error("Open changed the directory after rejecting it")
			}
		})
	}
}

func TestOpenFinishesKeyWithoutCertificate(t *testing.T) {
	// A crash between writing the key and the certificate leaves exactly this.
	dir := t.TempDir()
	first := mustOpen(t, dir)
	if err := os.Remove(filepath.Join(dir, RootCertFile)); err != nil {
		t.Fatal(err)
	}
	write(t, dir, atomicfile.TempPrefix(RootKeyFile)+"123", []byte("half a key"))
	second := mustOpen(t, dir)
	if !second.Root().PublicKey.(*ecdsa.PublicKey).Equal(first.Root().PublicKey) {
		t.Error("the root key was replaced instead of re-used")
	}
	if _, err := os.Stat(filepath.Join(dir, atomicfile.TempPrefix(RootKeyFile)+"123")); err == nil {
		t.Error("stale temporary file left behind")
	}
	third := mustOpen(t, dir)
	if !bytes.Equal(second.RootPEM(), third.RootPEM()) {
		t.Error("the re-created certificate was not written")
	}
}

func TestOpenRejectsBadSettings(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		td   string
		opt  Option
		want string
	}{
		{"", nil, "trust domain is empty"},
		{"Cluster.Local", nil, `"Cluster.Local"`},
		{"a/b", nil, `"a/b"`},
		{testTD, WithWorkloadCertTTL(0), "workload certificate TTL"},
		{testTD, WithRootCertTTL(-time.Hour), "root certificate TTL"},
		{testTD, WithGracePeriodRatio(1.5), "grace period ratio"},
		{testTD, WithKeyAlgorithm("DSA"), `"DSA"`},
		{testTD, WithClock(nil), "clock"},
	}
	for _, tc := range cases {
		var opts []Option
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		_, err := Open(dir, tc.td, opts...)
		checkOneLine(t, err, tc.want)
	}
	if _, err := Open("", testTD); err == nil {
		t.Error("Open with no directory succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Error("Open wrote files despite bad settings")
	}
}

func write(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshot returns the directory's names and contents as one string.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, e := range entries {
		sb.WriteString(e.Name() + "\x00")
		sb.Write(read(t, dir, e.Name()))
		sb.WriteString("\x00")
	}
	return sb.String()
}
