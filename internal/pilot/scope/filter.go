package scope

import (
	"fmt"
	"sync"

	meshconfig "istio.io/api/mesh/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// NamespaceFilter is the mesh config's discoverySelectors: which namespaces'
// objects the control plane reads at all. A namespace is selected when any
// selector matches its labels (conditions within one selector are ANDed); no
// selectors select every namespace. As in istiod, the root namespace gets no
// special treatment: with selectors set, it must be selected like any other
// or its Sidecars and other config are ignored. Cluster-scoped objects
// (Namespaces) always pass, so that the registry keeps every namespace's
// labels; istiod instead filters a Namespace object by its own selection.
//
// It is safe for concurrent use.
type NamespaceFilter struct {
	selectors []labels.Selector // nil: select all

	mu     sync.RWMutex
	labels map[string]map[string]string // namespace -> labels
}

// NewNamespaceFilter builds the filter from the mesh config's
// discoverySelectors and the known Namespace resources (other kinds in
// namespaces are ignored). It fails on a selector Kubernetes would reject, such
// as an unknown operator or In without values.
func NewNamespaceFilter(selectors []*meshconfig.LabelSelector, namespaces []*config.Resource) (*NamespaceFilter, error) {
	f := &NamespaceFilter{labels: map[string]map[string]string{}}
	for i, s := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(toKube(s))
		if err != nil {
			return nil, fmt.Errorf("mesh config discoverySelectors[%d]: %w", i, err)
		}
		f.selectors = append(f.selectors, sel)
	}
	for _, r := range namespaces {
		if r != nil && r.Kind == config.KindNamespace {
			f.labels[r.Meta.Name] = r.Meta.Labels
		}
	}
	return f, nil
}

func toKube(s *meshconfig.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: s.GetMatchLabels()}
	for _, e := range s.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      e.GetKey(),
			Operator: metav1.LabelSelectorOperator(e.GetOperator()),
			Values:   e.GetValues(),
		})
	}
	return out
}

// SelectsAll says there are no selectors, so every namespace is selected.
func (f *NamespaceFilter) SelectsAll() bool { return len(f.selectors) == 0 }

// Matches says whether a namespace with these labels is selected.
func (f *NamespaceFilter) Matches(nsLabels map[string]string) bool {
	if len(f.selectors) == 0 {
		return true
	}
	set := labels.Set(nsLabels)
	for _, s := range f.selectors {
		if s.Matches(set) {
			return true
		}
	}
	return false
}

// Selected says whether objects in the namespace are read. A namespace with
// no Namespace object has no labels, so only selectors that match an empty
// label set (such as DoesNotExist) select it.
func (f *NamespaceFilter) Selected(namespace string) bool {
	if len(f.selectors) == 0 {
		return true
	}
	f.mu.RLock()
	l := f.labels[namespace]
	f.mu.RUnlock()
	return f.Matches(l)
}

// Filter returns the resources that pass: cluster-scoped ones, and those in
// selected namespaces. The input is not modified.
func (f *NamespaceFilter) Filter(rs []*config.Resource) []*config.Resource {
	out := make([]*config.Resource, 0, len(rs))
	for _, r := range rs {
		if r == nil {
			continue
		}
		if r.Kind.ClusterScoped() || r.Meta.Namespace == "" || f.Selected(r.Meta.Namespace) {
			out = append(out, r)
		}
	}
	return out
}

// Relabel records that namespace ns's labels changed from oldLabels to
// newLabels (nil for a namespace that did not exist, or no longer does) and
// says whether the change selected it (added: read its objects now) or
// deselected it (removed: drop them).
func (f *NamespaceFilter) Relabel(ns string, oldLabels, newLabels map[string]string) (added, removed bool) {
	f.mu.Lock()
	if newLabels == nil {
		delete(f.labels, ns)
	} else {
		f.labels[ns] = newLabels
	}
	f.mu.Unlock()
	was, is := f.Matches(oldLabels), f.Matches(newLabels)
	return !was && is, was && !is
}
