package ca

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
)

// root is the CA's signing material as loaded or created by openRoot.
type root struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// openRoot loads dir's root or creates one. The key is written before the
// certificate, so the only state a crash can leave behind besides "nothing" is
// a key without its certificate, and that one is finished here by
// self-signing the existing key: no key is ever thrown away.
func openRoot(dir, trustDomain string, s *settings) (*root, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create root directory: %w", err)
	}
	removeStaleTemps(dir)
	certPath := filepath.Join(dir, RootCertFile)
	keyPath := filepath.Join(dir, RootKeyFile)

	certPEM, certErr := os.ReadFile(certPath)
	keyPEM, keyErr := os.ReadFile(keyPath)
	certMissing := errors.Is(certErr, fs.ErrNotExist)
	keyMissing := errors.Is(keyErr, fs.ErrNotExist)
	switch {
	case certErr != nil && !certMissing:
		return nil, fmt.Errorf("read root certificate: %w", certErr)
	case keyErr != nil && !keyMissing:
		return nil, fmt.Errorf("read root key: %w", keyErr)
	case certMissing && keyMissing:
		key, err := generateKey(s.alg)
		if err != nil {
			return nil, fmt.Errorf("create root: %w", err)
		}
		keyPEM, err := encodeKey(key)
		if err != nil {
			return nil, fmt.Errorf("create root: %w", err)
		}
		if err := atomicfile.Write(keyPath, keyPEM, 0o600); err != nil {
			return nil, fmt.Errorf("write root key: %w", err)
		}
		return createRootCert(certPath, key, trustDomain, s)
	case keyMissing:
		return nil, fmt.Errorf("%s is missing but %s exists: restore the key, or remove both to create a new root", keyPath, certPath)
	}

	key, err := parseKey(keyPath, keyPEM)
	if err != nil {
		return nil, err
	}
	if certMissing {
		s.log.Warn("root key has no certificate, probably after a crash; self-signing it again", "key", keyPath)
		return createRootCert(certPath, key, trustDomain, s)
	}
	cert, err := parseRootCert(certPath, certPEM, s.now())
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%s does not match the certificate in %s: restore the matching pair, or remove both to create a new root", keyPath, certPath)
	}
	return &root{cert: cert, key: key, certPEM: certPEM}, nil
}

func createRootCert(certPath string, key crypto.Signer, trustDomain string, s *settings) (*root, error) {
	tmpl, err := rootTemplate(trustDomain, s.now(), s.rootTTL)
	if err != nil {
		return nil, fmt.Errorf("create root: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create root: self-sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("create root: parse: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := atomicfile.Write(certPath, certPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write root certificate: %w", err)
	}
	s.log.Info("created root certificate", "path", certPath, "trustDomain", trustDomain, "notAfter", cert.NotAfter)
	return &root{cert: cert, key: key, certPEM: certPEM}, nil
}

// encodeKey writes keys as PKCS#8, the one encoding Envoy, rustls and
// openssl all read whatever the algorithm.
func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode %T as PKCS#8: %w", key, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseRootCert accepts exactly one certificate that may sign others and is
// valid now.
func parseRootCert(path string, data []byte, now time.Time) (*x509.Certificate, error) {
	block, err := onePEMBlock(path, data)
	if err != nil {
		return nil, err
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: PEM block is %q, want CERTIFICATE", path, block.Type)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case !cert.BasicConstraintsValid || !cert.IsCA:
		return nil, fmt.Errorf("%s: not a CA certificate (basic constraints lack CA:TRUE)", path)
	case cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0:
		return nil, fmt.Errorf("%s: certificate lacks the keyCertSign key usage", path)
	case now.After(cert.NotAfter):
		return nil, fmt.Errorf("%s: root certificate expired at %s: remove it and its key to create a new root",
			path, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// parseKey accepts the unencrypted encodings istiod and openssl write:
// PKCS#8, SEC 1 (EC PRIVATE KEY) and PKCS#1 (RSA PRIVATE KEY).
func parseKey(path string, data []byte) (crypto.Signer, error) {
	block, err := onePEMBlock(path, data)
	if err != nil {
		return nil, err
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block is %q, want an unencrypted PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY", path, block.Type)
	}
	if err != nil {
		// The parser's own message is an ASN.1 dump; what the operator needs
		// is which file is damaged.
		return nil, fmt.Errorf("%s: the %s block does not parse; the file is corrupt", path, block.Type)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		return k, nil
	case *rsa.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: %T keys are not supported, want ECDSA or RSA", path, key)
}

// onePEMBlock rejects anything but a single PEM block, so a file with a
// truncated or appended second key is not half-read without notice.
func onePEMBlock(path string, data []byte) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM data", path)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s: unexpected data after the first PEM block", path)
	}
	return block, nil
}

// removeStaleTemps deletes temporary files a crash left behind, so that no
// stray copy of a key lingers next to the real one.
func removeStaleTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, atomicfile.TempPrefix(RootKeyFile)) || strings.HasPrefix(n, atomicfile.TempPrefix(RootCertFile)) {
			os.Remove(filepath.Join(dir, n))
		}
	}
}
