package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// The pilot's parts that exist only on Kubernetes: the CA's root kept in a
// Secret, the certificate API authenticated by service-account tokens, and
// the injection webhook's caBundle kept current, the root published to
// every namespace. Off Kubernetes the pilot
// behaves as it always has.

// pilotNamespace is where the pilot's own objects live: its pod's
// namespace (POD_NAMESPACE, as istiod reads it), else meshperf-system.
func pilotNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return inject.PilotNamespace
}

// kubeTimeout bounds the pilot's start-up calls to the API server.
const kubeTimeout = 10 * time.Second

// restoreCARoot puts the root kept in the cluster into caDir before the CA
// opens it (no-op unless the pilot runs in a pod).
func restoreCARoot(ctx context.Context, kube kubernetes.Interface, caDir string) error {
	if kube == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, kubeTimeout)
	defer cancel()
	_, err := ca.RestoreRoot(ctx, kube, pilotNamespace(), ca.KubeRootSecretName, caDir)
	return err
}

// saveCARoot keeps a root the CA just created in the cluster.
func saveCARoot(ctx context.Context, kube kubernetes.Interface, caDir string) error {
	if kube == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, kubeTimeout)
	defer cancel()
	return ca.SaveRoot(ctx, kube, pilotNamespace(), ca.KubeRootSecretName, caDir)
}

// certificateAuth authenticates the certificate API's callers on Kubernetes.
func certificateAuth(kube kubernetes.Interface) ca.Authenticator {
	if kube == nil {
		return nil
	}
	return ca.NewTokenReviewAuthenticator(kube)
}

// injectionWebhook is the HTTPS server of /inject when --webhookAddr is
// bound (nil otherwise), with a certificate from the pilot's CA for the
// pilot's Service, re-issued at half its life as the TLS xDS port's.
func injectionWebhook(srv *discovery.Server, f *pilotFlags, log *slog.Logger) (*http.Server, error) {
	if f.listeners.get(listenerWebhook) == nil {
		return nil, nil
	}
	// The names of the pilot's Service in its own namespace: the one the
	// manifest was rendered for.
	host := inject.ServiceHost(pilotNamespace())
	tlsConfig, err := srv.ServingTLS(host, host+"."+f.domain)
	if err != nil {
		return nil, fmt.Errorf("injection webhook: %w", err)
	}
	wh, err := inject.NewWebhook(meshProxyOptions(f), log, srv.Metrics())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(inject.WebhookPath, wh)
	return &http.Server{Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}, nil
}

// meshProxyOptions are what the proxies the pilot puts in the cluster
// (injected sidecars, waypoints) are given: the images, and the pilot's
// Service in its own namespace for xDS and certificates.
func meshProxyOptions(f *pilotFlags) inject.Options {
	host := inject.ServiceHost(pilotNamespace())
	opts := f.injection
	opts.PilotAddress = net.JoinHostPort(host, strconv.Itoa(inject.PortXDS))
	opts.CAAddress = "https://" + net.JoinHostPort(host, strconv.Itoa(inject.PortSecureXDS))
	opts.TrustDomain = f.mesh.GetTrustDomain()
	return opts
}

// runWaypointDeployer deploys a waypoint for every Gateway of class
// istio-waypoint, as istiod does, when the pilot is the cluster's control
// plane: in its pod (a pilot on a host is not where the waypoints would
// connect) on a cluster that serves Gateways.
func runWaypointDeployer(ctx context.Context, g *errgroup.Group, f *pilotFlags, log *slog.Logger) {
	if f.kube.client == nil || !f.kube.inPod || f.kube.src == nil {
		return
	}
	gateways := f.kube.src.GatewayClient()
	if gateways == nil {
		log.Info("no waypoints: the cluster serves no Gateway API Gateways (run with --install-crds, or install the Gateway API's CRDs, and restart)")
		return
	}
	d := inject.NewWaypointDeployer(f.kube.client, gateways, meshProxyOptions(f), log)
	g.Go(func() error {
		if err := d.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("waypoint deployer: %w", err)
		}
		return nil
	})
}

// runCABundlePatcher keeps the webhook configuration trusting the pilot's
// root, on Kubernetes.
func runCABundlePatcher(ctx context.Context, g *errgroup.Group, srv *discovery.Server, f *pilotFlags, log *slog.Logger) {
	if f.kube.client == nil {
		log.Info("not on Kubernetes: the webhook configuration's caBundle is not managed")
		return
	}
	p := inject.NewCABundlePatcher(f.kube.client, inject.WebhookConfigName, srv.RootPEM(), log)
	g.Go(func() error {
		if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("caBundle patcher: %w", err)
		}
		return nil
	})
}

// secureServingNames are the names the TLS xDS port's certificate carries:
// istiod's (nil: discovery's defaults), and on Kubernetes the pilot's
// Service too, the host injected sidecars dial for their certificates.
func secureServingNames(f *pilotFlags) []string {
	if f.kube.client == nil {
		return nil
	}
	host := inject.ServiceHost(pilotNamespace())
	return append(slices.Clone(discovery.DefaultServingNames), host, host+"."+f.domain)
}

// runRootPublisher publishes the pilot's root to every namespace as
// ConfigMap istio-ca-root-cert, on Kubernetes in its pod, as istiod does:
// proxies and users read the mesh's trust anchor there.
func runRootPublisher(ctx context.Context, g *errgroup.Group, srv *discovery.Server, f *pilotFlags, log *slog.Logger) {
	// Only the pilot in its pod is the cluster's CA, its root kept in a
	// Secret: a pilot run from a host with --kubeconfig (cpload's, a
	// developer's) has a root of its own for the run, which would replace
	// the cluster's in every namespace.
	if f.kube.client == nil || !f.kube.inPod {
		return
	}
	p := ca.NewRootPublisher(f.kube.client, srv.RootPEM(), inject.IgnoredNamespaces, log)
	g.Go(func() error {
		if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("root publisher: %w", err)
		}
		return nil
	})
}
