package ca

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/atomicfile"
)

// On Kubernetes the root lives in a Secret, as istiod's self-signed root
// lives in istio-system/istio-ca-secret, so that a pilot restarted on
// another node (an empty data directory) keeps the root every proxy trusts.
// The keys are istiod's.
const (
	KubeRootSecretName = "istio-ca-secret"
	secretCertKey      = "ca-cert.pem"
	secretKeyKey       = "ca-key.pem"
	secretOwnerLabel   = "app.kubernetes.io/managed-by"
	secretOwnerValue   = "meshperf-pilot"
)

// RestoreRoot writes the root kept in the Secret namespace/name into dir,
// where Open reads it; without the Secret it leaves dir as it is (Open then
// creates a root, and SaveRoot keeps it). It reports whether the Secret
// existed.
func RestoreRoot(ctx context.Context, client kubernetes.Interface, namespace, name, dir string) (bool, error) {
	s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ca: read the root from secret %s/%s: %w", namespace, name, err)
	}
	cert, key := s.Data[secretCertKey], s.Data[secretKeyKey]
	if len(cert) == 0 || len(key) == 0 {
		return false, fmt.Errorf("ca: secret %s/%s lacks %s or %s: delete it to create a new root, or restore it", namespace, name, secretCertKey, secretKeyKey)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("ca: create root directory: %w", err)
	}
	// The key first, as openRoot writes them: a crash between the two
	// leaves a key that matches nothing only until the next restore.
	if err := atomicfile.Write(filepath.Join(dir, RootKeyFile), key, 0o600); err != nil {
		return false, fmt.Errorf("ca: write root key: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, RootCertFile), cert, 0o600); err != nil {
		return false, fmt.Errorf("ca: write root certificate: %w", err)
	}
	return true, nil
}

// SaveRoot keeps the root of dir (after Open) in the Secret namespace/name
// when the Secret does not exist yet. If another pilot saved a different
// root first, it says so: this pilot must restart to use that one.
func SaveRoot(ctx context.Context, client kubernetes.Interface, namespace, name, dir string) error {
	cert, err := os.ReadFile(filepath.Join(dir, RootCertFile))
	if err != nil {
		return fmt.Errorf("ca: %w", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, RootKeyFile))
	if err != nil {
		return fmt.Errorf("ca: %w", err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{secretOwnerLabel: secretOwnerValue}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{secretCertKey: cert, secretKeyKey: key},
	}
	_, err = client.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, gerr := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("ca: read secret %s/%s: %w", namespace, name, gerr)
		}
		if !bytes.Equal(got.Data[secretCertKey], cert) {
			return errors.New("ca: another pilot saved a different root in secret " + namespace + "/" + name + " at the same time: restart this one to use it")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("ca: save the root in secret %s/%s: %w", namespace, name, err)
	}
	return nil
}
