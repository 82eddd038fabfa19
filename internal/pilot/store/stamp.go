package store

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// stamp returns the entry to store for in, which replaces prev (nil when in is
// new), at revision rev. The server owns three metadata fields, as the
// Kubernetes API server does, and whatever the writer put in them is ignored:
//   - resourceVersion is the revision of the write that last changed the
//     object, so a reader can tell which of two copies is newer;
//   - creationTimestamp is set on create (to the second, as it is serialized)
//     and kept on update;
//   - generation is 1 on create and goes up by one when the spec changes, not
//     on label or annotation changes, so consumers can skip metadata-only
//     updates.
//
// changed is false when in, with those fields taken from prev, encodes to
// exactly prev's bytes: re-applying the same object must not produce a
// revision or an event, or every `apply` of an unchanged file would push
// config to the whole mesh.
func stamp(prev *entry, in *config.Resource, rev int64, now time.Time) (e *entry, changed bool, err error) {
	r := *in
	r.Meta = *in.Meta.DeepCopy()
	if prev == nil {
		r.Meta.CreationTimestamp = metav1.NewTime(now).Rfc3339Copy()
		r.Meta.Generation = 1
	} else {
		pm := &prev.res.Meta
		r.Meta.ResourceVersion = pm.ResourceVersion
		r.Meta.CreationTimestamp = pm.CreationTimestamp
		r.Meta.Generation = pm.Generation
		same, err := config.Encode(&r)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", in.Key(), err)
		}
		if bytes.Equal(same, prev.raw) {
			return prev, false, nil
		}
		// Only the spec differs if prev with in's spec encodes differently
		// from prev.
		probe := *prev.res
		probe.Spec = in.Spec
		specOnly, err := config.Encode(&probe)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", in.Key(), err)
		}
		if !bytes.Equal(specOnly, prev.raw) {
			r.Meta.Generation++
		}
	}
	r.Meta.ResourceVersion = strconv.FormatInt(rev, 10)
	raw, err := config.Encode(&r)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", in.Key(), err)
	}
	// Serve what was encoded, not the writer's object: the store then owns
	// its copy (a caller that mutates its Spec afterwards cannot change the
	// store behind its back) and Get returns exactly what a reopen would.
	res, err := decodeStored(in.Key().String(), raw)
	if err != nil {
		return nil, false, err
	}
	return &entry{res: res, raw: raw}, true, nil
}

// decodeStored decodes one stored object's canonical bytes.
func decodeStored(name string, raw []byte) (*config.Resource, error) {
	rs, err := config.Decode(name+".json", raw)
	if err != nil {
		return nil, fmt.Errorf("decode stored %s: %w", name, err)
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("decode stored %s: %d objects, want 1", name, len(rs))
	}
	return rs[0], nil
}
