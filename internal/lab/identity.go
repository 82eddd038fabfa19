package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/proc"
)

// Every proxy the lab starts proves who it is, as on Kubernetes: it gets
// its certificate from pilot's CA (the TLS listener), authenticated by its
// pod's token, which pilot issues and the lab writes where the kubelet
// projects a pod's token. A pod can then get no identity but its own, so
// the mTLS checks' "from the client's identity" means the client pod.

// The paths, under a pod's directory, where Kubernetes puts a pod's token
// (istio-agent's and ztunnel's default, relative to their working
// directory) and the mesh root (the istio-ca-root-cert ConfigMap).
const (
	podTokenPath = "var/run/secrets/tokens/istio-token"
	podRootPath  = "var/run/secrets/istio/root-cert.pem"
)

// podTokenLifetime is the lab's tokens' lifetime: pilot's maximum, so that
// a proxy renewing its certificate or reconnecting late in a long run is
// still believed. The tokens are removed with the run's secrets.
const podTokenLifetime = 24 * 60 * 60

// PodCredentials are what a proxy proves its pod's identity with.
type PodCredentials struct {
	CAAddress string // https://HOST:PORT, pilot's TLS listener
	RootCert  string // the mesh root's PEM file, to verify the CA with
	Token     string // the pod's token file
}

// sidecarArgs are meshperf-proxy's flags that point it at the CA with its
// credentials, verifying pilot's certificate against istiod's name.
func (c PodCredentials) sidecarArgs() []string {
	return []string{"--ca-address", c.CAAddress, "--ca-root-ca", c.RootCert, "--auth-token", c.Token,
		"--alt-xds-hostname", altXDSHostname}
}

// PodIdentity names a pod whose proxy needs credentials.
type PodIdentity struct {
	Namespace, Pod, ServiceAccount string
	Node                           string // the pod's node, for a node proxy; "" otherwise
}

// IssuePodCredentials asks pilot (through client) for the pod's token and
// writes it (0600) and pilot's root (0644) under dir as Kubernetes projects
// them (dir/var/run/secrets/...); owner, when set, is the user the proxy
// runs as, which must be able to read them.
func IssuePodCredentials(ctx context.Context, pilot *proc.Pilot, client *api.Client, dir string, id PodIdentity, owner *proc.User) (PodCredentials, error) {
	tls, err := netip.ParseAddrPort(pilot.Addrs.SecureGRPC)
	if err != nil {
		return PodCredentials{}, fmt.Errorf("the control plane's TLS listener %q: %w", pilot.Addrs.SecureGRPC, err)
	}
	root, err := os.ReadFile(pilot.RootCertPath())
	if err != nil {
		return PodCredentials{}, fmt.Errorf("the mesh root: %w", err)
	}
	resp, err := client.IssueToken(ctx, api.TokenRequest{Namespace: id.Namespace, ServiceAccount: id.ServiceAccount,
		Pod: id.Pod, Node: id.Node, ExpirationSeconds: podTokenLifetime})
	if err != nil {
		return PodCredentials{}, fmt.Errorf("%s's token: %w", id.Pod, err)
	}
	creds := PodCredentials{CAAddress: "https://" + tls.String(),
		RootCert: filepath.Join(dir, podRootPath), Token: filepath.Join(dir, podTokenPath)}
	for _, f := range []struct {
		path string
		data []byte
		perm os.FileMode
	}{{creds.RootCert, root, 0o644}, {creds.Token, []byte(resp.Token), 0o600}} {
		if err := writeOwned(f.path, f.data, f.perm, owner); err != nil {
			return PodCredentials{}, fmt.Errorf("%s's credentials: %w", id.Pod, err)
		}
	}
	return creds, nil
}

// writeOwned writes a file atomically, its directories traversable, and
// gives it to owner when set.
func writeOwned(path string, data []byte, perm os.FileMode, owner *proc.User) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, perm); err != nil {
		return err
	}
	if owner != nil {
		return os.Chown(path, int(owner.UID), int(owner.GID))
	}
	return nil
}

// podCredentials issues a pod's credentials under the run's secrets
// directory.
func (l *lab) podCredentials(ctx context.Context, pod, sa, node string, owner *proc.User) (PodCredentials, error) {
	creds, err := IssuePodCredentials(ctx, l.pilot, l.api, filepath.Join(l.secretsDir, pod),
		PodIdentity{Namespace: Namespace, Pod: pod, ServiceAccount: sa, Node: node}, owner)
	if err != nil {
		return PodCredentials{}, fmt.Errorf("lab: %w", err)
	}
	return creds, nil
}

// makeSecretsDir creates the run's secrets directory: outside the output
// directory, whose parents a sidecar's uid 1337 may not traverse (a home
// directory, a test's temporary directory), and so that no token outlives
// the run in its results; searchable but not listable by others.
func (l *lab) makeSecretsDir() error {
	dir, err := makeRunTempDir("secrets", l.cfg.RunID, 0o711)
	if err != nil {
		return fmt.Errorf("lab: secrets directory: %w", err)
	}
	l.secretsDir = dir
	return nil
}
