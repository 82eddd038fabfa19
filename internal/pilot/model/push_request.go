// Package model is the vocabulary the control plane's stages pass to each other:
// a push request (what changed, why, since when) and a proxy (who is connected).
// Sources create push requests, the push pipeline merges and schedules them, the
// xDS server carries them out for each proxy.
package model

import (
	"maps"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// TriggerReason says why a push happens; the values are istiod's, which are the
// label values of pilot_push_triggers.
type TriggerReason string

// Istio's trigger reasons.
const (
	ReasonEndpoint  TriggerReason = "endpoint"
	ReasonConfig    TriggerReason = "config"
	ReasonService   TriggerReason = "service"
	ReasonProxy     TriggerReason = "proxy"
	ReasonGlobal    TriggerReason = "global"
	ReasonUnknown   TriggerReason = "unknown"
	ReasonSecret    TriggerReason = "secret"
	ReasonNamespace TriggerReason = "namespace"
)

// PushRequest is one pending push: what changed and why.
type PushRequest struct {
	// Full says listeners, routes and clusters must be regenerated; false means
	// only endpoints (EDS) changed.
	Full bool
	// ConfigsUpdated are the objects that changed. Empty on a full push means
	// everything may have (a global push).
	ConfigsUpdated map[config.Key]struct{}
	// Reason counts each trigger: merged requests add their counts, never
	// de-duplicate them.
	Reason map[TriggerReason]int
	// Start is when the oldest merged request was made.
	Start time.Time
}

// NewPushRequest returns a request for one reason, made at start, about keys.
func NewPushRequest(reason TriggerReason, full bool, start time.Time, keys ...config.Key) *PushRequest {
	r := &PushRequest{Full: full, Reason: map[TriggerReason]int{reason: 1}, Start: start}
	if len(keys) > 0 {
		r.ConfigsUpdated = make(map[config.Key]struct{}, len(keys))
		for _, k := range keys {
			r.ConfigsUpdated[k] = struct{}{}
		}
	}
	return r
}

// Merge returns the union of r and other with istiod's rules: Full is ORed, the
// changed configs are unioned, reason counts are added, the earliest start is
// kept. Either may be nil. Neither is modified.
func (r *PushRequest) Merge(other *PushRequest) *PushRequest {
	switch {
	case r == nil:
		return other.clone()
	case other == nil:
		return r.clone()
	}
	m := r.clone()
	m.Full = r.Full || other.Full
	if len(other.ConfigsUpdated) > 0 {
		if m.ConfigsUpdated == nil {
			m.ConfigsUpdated = make(map[config.Key]struct{}, len(other.ConfigsUpdated))
		}
		maps.Copy(m.ConfigsUpdated, other.ConfigsUpdated)
	}
	if m.Reason == nil {
		m.Reason = make(map[TriggerReason]int, len(other.Reason))
	}
	for reason, n := range other.Reason {
		m.Reason[reason] += n
	}
	if m.Start.IsZero() || (!other.Start.IsZero() && other.Start.Before(m.Start)) {
		m.Start = other.Start
	}
	return m
}

func (r *PushRequest) clone() *PushRequest {
	if r == nil {
		return nil
	}
	c := *r
	c.ConfigsUpdated = maps.Clone(r.ConfigsUpdated)
	c.Reason = maps.Clone(r.Reason)
	return &c
}

// Reasons is the total number of triggers merged into r.
func (r *PushRequest) Reasons() int {
	n := 0
	for _, c := range r.Reason {
		n += c
	}
	return n
}
