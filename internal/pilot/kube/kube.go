// Package kube is the control plane's Kubernetes source, istiod's: it reads
// Istio's configuration kinds, Services and Namespaces from the API server
// through informers into a store.Feed, which the pipeline watches as it
// watches the embedded store or --configDir; and it feeds the service
// registry each Service's endpoints from its EndpointSlices, enriched from
// their Pods and Nodes. Before it watches anything it checks what would
// otherwise fail later and noisily (the API server answers, RBAC lets the
// pilot list and watch what it needs, Istio's CRDs are there, or installs
// them when asked), each as one line.
package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	istioclient "istio.io/client-go/pkg/clientset/versioned"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/registry"
	"github.com/meshperf/meshperf/internal/pilot/store"
)

// Options configure the Kubernetes source.
type Options struct {
	// RESTConfig reaches the API server (RESTConfig builds it).
	RESTConfig *rest.Config
	// InstallCRDs applies Istio's CRDs (from CRDManifest, else
	// crdmanifest.Istio.Path()) when any the pilot reads is missing, instead of
	// failing.
	InstallCRDs bool
	CRDManifest string
	// ReachTimeout bounds the wait for the API server to answer;
	// DefaultReachTimeout if zero.
	ReachTimeout time.Duration
	Logger       *slog.Logger
}

// EndpointSink is where EndpointSlices and pods (as workloads) go: the
// service registry.
type EndpointSink interface {
	SetEndpointSlice(service config.Key, slice string, eps []registry.SliceEndpoint)
	DeleteEndpointSlice(service config.Key, slice string)
	SetPodWorkload(p *registry.PodWorkload)
	DeletePodWorkload(namespace, name string)
}

// Source is the pilot's view of one cluster.
type Source struct {
	opts    Options
	log     *slog.Logger
	host    string
	core    kubernetes.Interface
	istio   istioclient.Interface
	gateway gatewayclient.Interface // nil when the cluster has no Gateway API Gateways
	feed    *store.Feed
	metrics *metrics

	mu     sync.Mutex
	cancel context.CancelFunc        // stops the informers
	done   chan struct{}             // closed when they have stopped
	pods   cache.SharedIndexInformer // the running pod informer, for the CA's node checks
}

// New checks that the cluster can be watched (reachable, RBAC, CRDs,
// installing them if asked) and returns the source, not yet watching: Start
// does that. Its errors are one line each.
func New(ctx context.Context, opts Options) (*Source, error) {
	if opts.ReachTimeout == 0 {
		opts.ReachTimeout = DefaultReachTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := opts.RESTConfig
	s := &Source{opts: opts, log: log, host: cfg.Host, feed: store.NewFeed(cfg.Host), metrics: newMetrics()}
	var err error
	if s.core, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("client for the Kubernetes API server %s: %w", cfg.Host, err)
	}
	if s.istio, err = istioclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("the Istio client for the Kubernetes API server %s: %w", cfg.Host, err)
	}
	if err := Reachable(ctx, s.core, cfg.Host, opts.ReachTimeout); err != nil {
		return nil, err
	}
	if err := s.ensureCRDs(ctx); err != nil {
		return nil, err
	}
	gw, err := s.ensureGatewayCRD(ctx)
	if err != nil {
		return nil, err
	}
	resources := append(append([]Resource{}, CoreResources...), istioResources...)
	if gw[gatewayAPIGateways] {
		if s.gateway, err = gatewayclient.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("the Gateway API client for %s: %w", cfg.Host, err)
		}
		resources = append(resources, gatewayAPIGateways)
	}
	if err := checkAccess(ctx, s.core, resources); err != nil {
		return nil, err
	}
	return s, nil
}

// ensureCRDs checks Istio's CRDs and, when some are missing and the pilot
// was asked to, installs them.
func (s *Source) ensureCRDs(ctx context.Context) error {
	err := checkCRDs(s.core)
	if err == nil || !errors.Is(err, ErrCRDsMissing) || !s.opts.InstallCRDs {
		return err
	}
	if err := s.installCRDs(ctx, crdmanifest.Istio, s.opts.CRDManifest); err != nil {
		return err
	}
	return checkCRDs(s.core)
}

// ensureGatewayCRD says which of the Gateway API's resources the cluster
// serves, installing the Gateway CRD first when it lacks it and the pilot
// was asked to install CRDs: waypoints are Gateways, and without the kind a
// cluster can declare none (the pilot then watches no Gateways).
func (s *Source) ensureGatewayCRD(ctx context.Context) (map[Resource]bool, error) {
	gw, err := served(s.core, "v1", []Resource{gatewayAPIGateways})
	if err != nil || gw[gatewayAPIGateways] || !s.opts.InstallCRDs {
		return gw, err
	}
	if err := s.installCRDs(ctx, crdmanifest.GatewayAPI, ""); err != nil {
		return nil, err
	}
	return served(s.core, "v1", []Resource{gatewayAPIGateways})
}

// installCRDs installs m's CRDs (from path when given) for --install-crds.
func (s *Source) installCRDs(ctx context.Context, m crdmanifest.Manifest, path string) error {
	names, path, err := InstallManifest(ctx, s.opts.RESTConfig, m, path)
	if err != nil {
		return fmt.Errorf("--install-crds: %w", err)
	}
	s.log.Info("installed "+m.What, "count", len(names), "manifest", path)
	return nil
}

// GatewayClient is the Gateway API's client, nil when the cluster serves
// no Gateways.
func (s *Source) GatewayClient() gatewayclient.Interface { return s.gateway }

// Store is the config the source keeps up to date: read-only, watched like
// any store.
func (s *Source) Store() *store.Feed { return s.feed }

// Collectors are the source's metrics, for the control plane's registry.
func (s *Source) Collectors() []prometheus.Collector { return s.metrics.collectors() }

// Host is the API server's address.
func (s *Source) Host() string { return s.host }

// Start starts the informers, feeding the store and sink, and returns once
// every informer has listed what exists (istiod's HasSynced): until then the
// control plane has no complete view to push. The informers run until ctx
// ends or Close.
func (s *Source) Start(ctx context.Context, sink EndpointSink) error {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancel, s.done = cancel, make(chan struct{})
	s.mu.Unlock()
	w := newWatch(s, sink)
	synced, err := w.start(ctx)
	if err != nil {
		cancel()
		close(s.done)
		return err
	}
	s.mu.Lock()
	s.pods = w.pods
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		w.shutdown()
		close(s.done)
	}()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the Kubernetes informers did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Close stops the informers and ends the store's watches.
func (s *Source) Close() error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return s.feed.Close()
}
