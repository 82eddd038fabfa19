package sim

import (
	"slices"
	"time"
)

// Report sums up a fleet.
type Report struct {
	Proxies   int
	Delta     bool
	Conns     int       // gRPC connections the proxies shared
	Start     time.Time // Start was called
	Connected int       // proxies whose stream opened
	Synced    int       // proxies that had their first full config
	// AllConnected is from Start to the last proxy's stream opening, and
	// AllSynced to the last proxy's first full config; zero unless every
	// proxy got that far.
	AllConnected time.Duration
	AllSynced    time.Duration
	// FirstConfig is, over proxies, the time from a proxy's stream opening to
	// its first full config.
	FirstConfig Percentiles
	Types       [numTypes]TypeReport
	Acks, Nacks int
	// StreamErrors counts streams that failed; Reconnects those reopened.
	StreamErrors int
	Reconnects   int
}

// TypeReport sums up one type over the fleet.
type TypeReport struct {
	Type      Type
	Responses int   // responses received (pushes, plus answers to requests)
	Bytes     int64 // bytes received in all of them
	// SyncBytes is the first full config's bytes of this type, per proxy.
	SyncBytesMean float64
	SyncBytesMax  int64
	// BytesMean and BytesMax are all bytes of this type received, per proxy.
	BytesMean float64
	BytesMax  int64
}

// Percentiles of a set of durations.
type Percentiles struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// PercentilesOf computes nearest-rank percentiles of ds (which it sorts).
func PercentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return Percentiles{N: len(ds), P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: ds[len(ds)-1]}
}

// Report sums up what every proxy recorded so far.
func (f *Fleet) Report() Report {
	f.mu.Lock()
	r := Report{Proxies: len(f.proxies), Delta: f.opts.Delta, Start: f.start,
		Conns: connsFor(len(f.proxies), f.opts.ProxiesPerConn)}
	f.mu.Unlock()
	var firsts []time.Duration
	var lastConn, lastSync time.Time
	for t := range numTypes {
		r.Types[t].Type = t
	}
	for _, p := range f.proxies {
		s := p.rec.snapshot()
		if !s.Connected.IsZero() {
			r.Connected++
			lastConn = later(lastConn, s.Connected)
		}
		if !s.Synced.IsZero() {
			r.Synced++
			lastSync = later(lastSync, s.Synced)
			firsts = append(firsts, s.Synced.Sub(s.Connected))
		}
		r.StreamErrors += s.StreamErrors
		r.Reconnects += s.Reconnects
		var bytes [numTypes]int64
		for _, resp := range s.Responses {
			tr := &r.Types[resp.Type]
			tr.Responses++
			tr.Bytes += int64(resp.Bytes)
			bytes[resp.Type] += int64(resp.Bytes)
		}
		for t := range numTypes {
			r.Acks += s.Acks[t]
			r.Nacks += s.Nacks[t]
			tr := &r.Types[t]
			tr.SyncBytesMax = max(tr.SyncBytesMax, s.SyncBytes[t])
			tr.SyncBytesMean += float64(s.SyncBytes[t])
			tr.BytesMax = max(tr.BytesMax, bytes[t])
		}
	}
	for t := range numTypes {
		tr := &r.Types[t]
		if r.Synced > 0 {
			tr.SyncBytesMean /= float64(r.Synced)
		}
		tr.BytesMean = float64(tr.Bytes) / float64(r.Proxies)
	}
	if r.Connected == r.Proxies && !r.Start.IsZero() {
		r.AllConnected = lastConn.Sub(r.Start)
	}
	if r.Synced == r.Proxies && !r.Start.IsZero() {
		r.AllSynced = lastSync.Sub(r.Start)
	}
	r.FirstConfig = PercentilesOf(firsts)
	return r
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
