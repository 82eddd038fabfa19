package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// proxy is one simulated sidecar. Its goroutine owns the stream: it receives,
// records, and sends every ACK and subscription change itself, as Envoy's main
// thread does.
type proxy struct {
	index int
	// spec is kept rather than the node it describes: a node's metadata, as
	// protobuf Structs, costs a few KB per proxy and is sent only once per
	// stream (see node).
	spec  ProxySpec
	fleet *Fleet
	nack  bool // this proxy rejects responses of the fleet's NackTypes
	rec   recorder
}

// node is what the proxy sends as its node on a new stream. NewFleet built it
// once already, so it cannot fail here for a spec that passed there.
func (p *proxy) node() (*corev3.Node, error) {
	node, err := p.spec.Node(p.fleet.opts.Node)
	if err != nil {
		return nil, fmt.Errorf("simulated proxy %d: %w", p.index, err)
	}
	return node, nil
}

// run keeps a stream open until ctx ends, reconnecting with exponential
// backoff after a failure, as Envoy does.
func (p *proxy) run(ctx context.Context, cc *adsConn) {
	o := &p.fleet.opts
	backoff := o.BackoffMin
	p.rec.update(func(s *ProxyStats) { s.Started = time.Now() })
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			p.rec.update(func(s *ProxyStats) { s.Reconnects++ })
		}
		st := newSession(p)
		var err error
		if o.Delta {
			err = st.runDelta(ctx, cc)
		} else {
			err = st.runSotW(ctx, cc)
		}
		if ctx.Err() != nil {
			return
		}
		if st.synced {
			backoff = o.BackoffMin // the stream worked; start backing off afresh
		}
		p.rec.update(func(s *ProxyStats) {
			s.StreamErrors++
			s.LastError = err.Error()
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, o.BackoffMax)
	}
}

// session is the subscription state of one stream; a new stream starts over.
type session struct {
	p      *proxy
	names  [numTypes][]string // sorted subscribed names; nil for wildcard types
	need   [numTypes]bool     // types that must be answered before the proxy is synced
	answer [numTypes]bool     // types answered on this stream
	synced bool
	bytes  [numTypes]int64 // received on this stream until synced

	// delta only: what CDS and LDS have told the proxy so far, since each
	// response carries only changes.
	edsOf    map[string]string   // EDS cluster name -> the name to ask EDS for
	routesOf map[string][]string // listener name -> its RDS names
}

func newSession(p *proxy) *session {
	st := &session{p: p}
	st.need[Cluster], st.need[Listener] = true, true
	if secrets := p.fleet.opts.secrets(); len(secrets) > 0 {
		st.names[Secret] = secrets
		st.need[Secret] = true
	}
	return st
}

// opened records that the proxy's stream is open (the first time only).
func (st *session) opened() {
	p := st.p
	p.rec.update(func(s *ProxyStats) {
		if s.Connected.IsZero() {
			s.Connected = time.Now()
			p.fleet.markConnected()
		}
		s.Waiting = st.waiting()
	})
}

// initialTypes are the types a new stream asks for at once: CDS and LDS as
// wildcards (no names), and SDS for its secrets if it has any. EDS and RDS
// follow from what CDS and LDS name.
func (st *session) initialTypes() []Type {
	if st.names[Secret] == nil {
		return []Type{Cluster, Listener}
	}
	return []Type{Cluster, Listener, Secret}
}

// rejects says whether this proxy NACKs responses of type t.
func (st *session) rejects(t Type) bool { return st.p.nack && st.p.fleet.nackType[t] }

// received records a response. Call it after the names the response implies
// have been subscribed to, so that the first config is complete only once they
// are answered too.
func (st *session) received(at time.Time, t Type, nack bool, resources, removed, size int, version, nonce string) {
	p := st.p
	st.answer[t] = true
	if !st.synced {
		st.bytes[t] += int64(size)
	}
	justSynced := !st.synced && st.complete()
	if justSynced {
		st.synced = true
	}
	p.rec.update(func(s *ProxyStats) {
		s.Responses = append(s.Responses, Response{
			At: at, Type: t, Resources: int32(resources), Removed: int32(removed), Bytes: int32(size),
			Version: intern(version), Nonce: nonce, Nacked: nack,
		})
		if nack {
			s.Nacks[t]++
		} else {
			s.Acks[t]++
		}
		if justSynced && s.Synced.IsZero() {
			s.Synced, s.SyncBytes = at, st.bytes
			p.fleet.markSynced()
		}
		s.Waiting = st.waiting()
	})
}

// waiting says which needed types this stream has not had answered.
func (st *session) waiting() (w [numTypes]bool) {
	for t := range numTypes {
		w[t] = st.need[t] && !st.answer[t]
	}
	return w
}

// complete says whether every needed type has been answered.
func (st *session) complete() bool { return st.waiting() == [numTypes]bool{} }

// setDependent records the names a CDS or LDS response implies for EDS or
// RDS and returns those added and removed.
func (st *session) setDependent(t Type, names []string) (added, removed []string) {
	slices.Sort(names)
	names = slices.Compact(names)
	old := st.names[t]
	added, removed = diffSorted(old, names)
	if len(added) == 0 && len(removed) == 0 {
		return nil, nil
	}
	for i, n := range names {
		names[i] = intern(n)
	}
	st.names[t] = names
	if len(names) > 0 {
		st.need[t] = true
	}
	return added, removed
}

// diffSorted returns what b has that a lacks, and what a has that b lacks.
func diffSorted(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}

// nackDetail is the error a rejecting proxy reports, as Envoy would for config
// it cannot apply.
func (st *session) nackDetail(t Type) *statuspb.Status {
	return &statuspb.Status{
		Code:    int32(codes.InvalidArgument),
		Message: fmt.Sprintf("simulated rejection of %s by proxy %d", t, st.p.index),
	}
}

// checkWatches records the first arrival of watched names in a response.
func (st *session) checkWatches(at time.Time, names func(fn func(string))) {
	ws := st.p.fleet.watches.Load()
	if ws == nil || len(*ws) == 0 {
		return
	}
	names(func(name string) {
		if w, ok := (*ws)[name]; ok {
			w.arrived(st.p.index, at)
		}
	})
}

// streamError turns a stream's end into the error recorded for it.
func streamError(what string, err error) error {
	if errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}
