package kube

import (
	"context"
	"fmt"
	"sync"

	istioinformers "istio.io/client-go/pkg/informers/externalversions"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// watch is one run of the source's informers.
type watch struct {
	src  *Source
	sink EndpointSink

	coreFactory  informers.SharedInformerFactory
	istioFactory istioinformers.SharedInformerFactory
	gwFactory    gatewayinformers.SharedInformerFactory // nil without the Gateway API

	slices, pods, nodes cache.SharedIndexInformer

	// mu serializes endpoint updates: a slice's endpoints are rebuilt from
	// the informers' current slice, pods and node under it, so whichever of
	// a slice and a pod event comes last sends what is true now.
	mu sync.Mutex
}

// resync 0: informers relist only after a broken watch; a periodic resync
// would re-put every object, which the store turns into no change anyway.
const resync = 0

func newWatch(s *Source, sink EndpointSink) *watch {
	w := &watch{
		src: s, sink: sink,
		coreFactory:  informers.NewSharedInformerFactory(s.core, resync),
		istioFactory: istioinformers.NewSharedInformerFactory(s.istio, resync),
	}
	if s.gateway != nil {
		w.gwFactory = gatewayinformers.NewSharedInformerFactory(s.gateway, resync)
	}
	return w
}

// start registers every handler, starts the informers and returns what
// tells that each handler has seen its informer's initial list. The slice
// handler is added once Pods and Nodes are listed (the informer lists
// meanwhile, and replays its cache to a late handler), so that the first
// endpoints already carry their pods' labels and nodes' localities instead
// of being sent bare and then again.
func (w *watch) start(ctx context.Context) ([]cache.InformerSynced, error) {
	var synced []cache.InformerSynced
	for _, k := range w.configKinds() {
		reg, err := k.informer.AddEventHandler(w.configHandler(k))
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", k.kind, err)
		}
		synced = append(synced, reg.HasSynced)
	}
	core := w.coreFactory
	w.pods = core.Core().V1().Pods().Informer()
	w.nodes = core.Core().V1().Nodes().Informer()
	w.slices = core.Discovery().V1().EndpointSlices().Informer()
	if err := w.slices.AddIndexers(sliceIndexers); err != nil {
		return nil, fmt.Errorf("index EndpointSlices: %w", err)
	}
	if err := w.pods.AddIndexers(podIndexers); err != nil {
		return nil, fmt.Errorf("index pods: %w", err)
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  cache.ResourceEventHandler
	}{{w.pods, w.podHandler()}, {w.pods, w.podWorkloadHandler()}, {w.nodes, w.nodeHandler()}} {
		reg, err := h.inf.AddEventHandler(h.fn)
		if err != nil {
			return nil, fmt.Errorf("watch pods and nodes: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	w.startFactories(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), w.pods.HasSynced, w.nodes.HasSynced) {
		return nil, fmt.Errorf("the Kubernetes pods and nodes did not sync: %w", context.Cause(ctx))
	}
	reg, err := w.slices.AddEventHandler(w.sliceHandler())
	if err != nil {
		return nil, fmt.Errorf("watch EndpointSlices: %w", err)
	}
	return append(synced, reg.HasSynced), nil
}

func (w *watch) startFactories(ctx context.Context) {
	w.coreFactory.Start(ctx.Done())
	w.istioFactory.Start(ctx.Done())
	if w.gwFactory != nil {
		w.gwFactory.Start(ctx.Done())
	}
}

// shutdown waits for every informer goroutine to end; ctx must be done.
func (w *watch) shutdown() {
	w.coreFactory.Shutdown()
	w.istioFactory.Shutdown()
	if w.gwFactory != nil {
		w.gwFactory.Shutdown()
	}
}
