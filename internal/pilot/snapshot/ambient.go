package snapshot

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	securityapi "istio.io/api/security/v1beta1"
	"istio.io/istio/pkg/workloadapi"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// The ambient mode's workload discovery (WDS) types, which node proxies
// (ztunnel) subscribe to.
const (
	AddressType       = "type.googleapis.com/istio.workload.Address"
	AuthorizationType = "type.googleapis.com/istio.security.Authorization"
)

// ambientConfig is what every node proxy is sent: the same for all of them,
// generated once per snapshot on first use.
type ambientConfig struct {
	once           sync.Once
	err            error
	addresses      []Resource // workloads by uid, services by NS/HOSTNAME
	authorizations []Resource // by NS/NAME
	digest         string     // of both, to tell whether a push changes them
}

// generateAmbient returns a node proxy's resources of typeURL: every
// address and every policy, whatever it subscribed to (it subscribes to
// everything).
func (s *Snapshot) generateAmbient(typeURL string) ([]Resource, error) {
	a, err := s.ambient()
	if err != nil {
		return nil, err
	}
	switch typeURL {
	case AddressType:
		return a.addresses, nil
	case AuthorizationType:
		return a.authorizations, nil
	}
	return nil, fmt.Errorf("type %s is not served to node proxies (ztunnel), only %s and %s", typeURL, AddressType, AuthorizationType)
}

// AmbientDigest identifies what node proxies are sent from this snapshot:
// two snapshots with the same digest send them the same resources, so a push
// between them can skip every node proxy.
func (s *Snapshot) AmbientDigest() (string, error) {
	a, err := s.ambient()
	if err != nil {
		return "", err
	}
	return a.digest, nil
}

func (s *Snapshot) ambient() (*ambientConfig, error) {
	s.ambientCfg.once.Do(func() {
		if s.ambientCfg.err = s.buildAmbient(&s.ambientCfg); s.ambientCfg.err != nil {
			s.ambientCfg.err = fmt.Errorf("workload discovery: %w", s.ambientCfg.err)
		}
	})
	return &s.ambientCfg, s.ambientCfg.err
}

func (s *Snapshot) buildAmbient(out *ambientConfig) error {
	root := s.Scopes.RootNamespace()
	for _, w := range s.Registry.Workloads {
		if !w.FromEntry && !w.FromPod {
			continue // a sidecar registered by its connection: its pod, or entry, is the workload
		}
		policies := s.workloadPolicies(w)
		if s.peerAuthenticationsFor(w.Namespace, w.Labels).workloadMode() == generate.MTLSStrict {
			policies = append(policies, root+"/"+generate.StaticStrictPolicyName)
		}
		wl := generate.AmbientWorkload(generate.WorkloadInput{
			Workload: w, TrustDomain: s.Mesh.GetTrustDomain(), Ambient: s.captured(w) || s.isWaypointPod(w),
			Policies: policies, Waypoint: s.workloadWaypoint(w),
		})
		r, err := encode(wl.Uid, &workloadapi.Address{Type: &workloadapi.Address_Workload{Workload: wl}})
		if err != nil {
			return err
		}
		out.addresses = append(out.addresses, r)
	}
	for _, svc := range s.Registry.Services {
		ws := generate.AmbientService(svc, s.serviceWaypoint(svc))
		name := generate.ServiceResourceName(svc.Namespace, svc.Hostname)
		r, err := encode(name, &workloadapi.Address{Type: &workloadapi.Address_Service{Service: ws}})
		if err != nil {
			return err
		}
		out.addresses = append(out.addresses, r)
	}
	for _, r := range s.authorizationPolicies {
		ap, ok := r.Spec.(*securityapi.AuthorizationPolicy)
		if !ok {
			continue
		}
		res, err := encode(r.Meta.Namespace+"/"+r.Meta.Name, generate.Authorization(r.Meta.Namespace, r.Meta.Name, root, ap))
		if err != nil {
			return err
		}
		out.authorizations = append(out.authorizations, res)
	}
	if s.anyStrict() {
		// Sent whenever a policy is STRICT, as istiod does, whichever
		// workloads name it: adding a workload then changes its address
		// only, which endpoint pushes carry.
		r, err := encode(root+"/"+generate.StaticStrictPolicyName, generate.StaticStrictAuthorization(root))
		if err != nil {
			return err
		}
		out.authorizations = append(out.authorizations, r)
	}
	byName := func(a, b Resource) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(out.addresses, byName)
	slices.SortFunc(out.authorizations, byName)
	out.digest = digest(out.addresses, out.authorizations)
	return nil
}

// workloadPolicies are the WDS names of the workload-scoped policies that
// select w: those with a selector, in its namespace or the root namespace,
// sorted (namespace- and mesh-wide ones apply by their scope, unnamed).
func (s *Snapshot) workloadPolicies(w *model.Workload) []string {
	root := s.Scopes.RootNamespace()
	var out []string
	for _, r := range s.authorizationPolicies {
		ap, ok := r.Spec.(*securityapi.AuthorizationPolicy)
		if !ok || ap.GetSelector() == nil || (r.Meta.Namespace != w.Namespace && r.Meta.Namespace != root) {
			continue
		}
		if hasLabels(w.Labels, ap.GetSelector().GetMatchLabels()) {
			out = append(out, r.Meta.Namespace+"/"+r.Meta.Name)
		}
	}
	slices.Sort(out)
	return out
}

// anyStrict says whether any PeerAuthentication asks for STRICT mTLS.
func (s *Snapshot) anyStrict() bool {
	for _, r := range s.peerAuthentications {
		if pa, ok := r.Spec.(*securityapi.PeerAuthentication); ok && pa.GetMtls().GetMode() == securityapi.PeerAuthentication_MutualTLS_STRICT {
			return true
		}
	}
	return false
}

// captured says whether the node proxy carries a workload's traffic:
// enrolled, and without a sidecar of its own (istiod's ambient index sends
// a pod with a sidecar as not captured, whatever its namespace says).
func (s *Snapshot) captured(w *model.Workload) bool {
	return s.enrolled(w) && !w.Sidecar
}

// enrolled says whether a workload is in the ambient mode: its own label,
// else its namespace's.
func (s *Snapshot) enrolled(w *model.Workload) bool {
	if mode, ok := w.Labels[generate.DataplaneModeLabel]; ok {
		return mode == generate.AmbientMode
	}
	return s.Registry.Namespaces[w.Namespace][generate.DataplaneModeLabel] == generate.AmbientMode
}

// digest hashes resource sets by name and encoded bytes (encode's are
// deterministic, so equal content hashes equal).
func digest(sets ...[]Resource) string {
	h := sha256.New()
	for _, set := range sets {
		for _, r := range set {
			h.Write([]byte(r.Name))
			h.Write([]byte{0})
			h.Write(r.Body.GetValue())
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	return hex.EncodeToString(h.Sum(nil))
}
