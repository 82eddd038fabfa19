package inject

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// resync re-checks the configuration now and then even without a change,
// as a backstop for a missed event.
const resync = 5 * time.Minute

// CABundlePatcher keeps a MutatingWebhookConfiguration's caBundle the
// pilot's root, as istiod's webhook patcher does: the API server verifies
// the webhook's serving certificate (issued by the pilot's CA) with it. It
// patches at start and again whenever the configuration changes so that
// one of its webhooks no longer carries the root (re-applied manifest,
// another writer, a new root after a restart).
type CABundlePatcher struct {
	client kubernetes.Interface
	name   string
	root   []byte
	log    *slog.Logger
}

// NewCABundlePatcher patches the configuration name with rootPEM.
func NewCABundlePatcher(client kubernetes.Interface, name string, rootPEM []byte, log *slog.Logger) *CABundlePatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CABundlePatcher{client: client, name: name, root: bytes.Clone(rootPEM), log: log}
}

// Patch sets every webhook's caBundle of the configuration to the root,
// when one differs; it reports whether it wrote.
func (p *CABundlePatcher) Patch(ctx context.Context) (bool, error) {
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wrote = false
		api := p.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
		cfg, err := api.Get(ctx, p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !p.stale(cfg) {
			return nil
		}
		cfg = cfg.DeepCopy()
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].ClientConfig.CABundle = p.root
		}
		if _, err := api.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("patch the caBundle of mutatingwebhookconfiguration %s: %w", p.name, err)
	}
	return wrote, nil
}

func (p *CABundlePatcher) stale(cfg *admissionregv1.MutatingWebhookConfiguration) bool {
	for _, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, p.root) {
			return true
		}
	}
	return false
}

// Run watches the configuration until ctx ends, patching it whenever it
// is stale. A configuration that does not exist yet is patched when it is
// created; a failed patch is logged and retried at the next change or
// resync.
func (p *CABundlePatcher) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.name).String()
		}))
	inf := factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
	changed := make(chan struct{}, 1)
	notify := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
	}); err != nil {
		return fmt.Errorf("watch mutatingwebhookconfiguration %s: %w", p.name, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if _, err := p.patchBounded(ctx); apierrors.IsNotFound(err) {
		p.log.Warn("the webhook configuration does not exist yet: its caBundle is set when it is created", "name", p.name)
	} else if err != nil {
		p.log.Warn("caBundle not patched", "error", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		wrote, err := p.patchBounded(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err):
			p.log.Warn("caBundle not patched", "error", err)
		case wrote:
			p.log.Info("caBundle set to the pilot's root", "mutatingwebhookconfiguration", p.name)
		}
	}
}

// patchTimeout bounds one patch, so that an API server that stopped
// answering delays the next change's patch instead of blocking for ever.
const patchTimeout = 30 * time.Second

func (p *CABundlePatcher) patchBounded(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, patchTimeout)
	defer cancel()
	return p.Patch(ctx)
}
