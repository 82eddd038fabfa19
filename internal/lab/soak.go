package lab

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/proc/procstat"
)

// A soak is one long run of a scenario's single point through the mesh,
// watching each sidecar's resident memory over time: a leak shows as a
// slope, where a run's average hides it.

// SoakSample is the sidecars' resident memory at one moment of a soak.
type SoakSample struct {
	At  time.Duration     // since the load started
	RSS map[string]uint64 // bytes, by role (clientSidecar, serverSidecar)
}

// SidecarTrend is one sidecar's memory over a soak.
type SidecarTrend struct {
	Role                  string
	StartMB, EndMB, MaxMB float64
	// SlopeMBPer10Min is the least-squares slope of RSS against time over
	// the samples after the warm-up, in MB per 10 minutes; Fitted is how
	// many samples it was fitted to.
	SlopeMBPer10Min float64
	Fitted          int
}

// SoakReport is what a soak measured.
type SoakReport struct {
	Spec     scenario.RunSpec
	Outcome  Outcome // the run itself: calls, errors and codes, latency, checks
	Network  string
	Interval time.Duration
	Samples  []SoakSample
	Trends   []SidecarTrend
	CSV      string // path of the samples
}

// Soak runs cfg's scenario, which must expand to one run with at least one
// sidecar, sampling each sidecar's RSS every interval; it writes the
// samples to soak.csv in the output directory and stores the run (its
// latency, CPU and average memory) in the results database like any other.
func Soak(ctx context.Context, cfg Config, interval time.Duration) (*SoakReport, error) {
	if cfg.Scenario == nil {
		return nil, errors.New("lab: no scenario")
	}
	if err := CheckSoak(cfg.Scenario, interval); err != nil {
		return nil, err
	}
	spec := cfg.Scenario.Expand()[0]
	l, err := newLab(cfg)
	if err != nil {
		return nil, err
	}
	defer l.finish()
	if err := l.start(ctx); err != nil {
		return nil, err
	}
	if err := l.ensure(ctx, spec); err != nil {
		return nil, err
	}
	l.logf("meshperf lab soak: %s at %d qps through %s; sidecar memory every %s (Ctrl-C stops it and keeps what was sampled)",
		spec.Duration, spec.QPS, spec.Mode, interval)
	rep := &SoakReport{Spec: spec, Network: string(l.kind()), Interval: interval, CSV: filepath.Join(l.cfg.OutDir, "soak.csv")}
	watch := map[string]*proc.Process{}
	if l.clientSC != nil {
		watch[l.clientSC.Name()] = l.clientSC
	}
	if l.serverSC != nil {
		watch[l.serverSC.Name()] = l.serverSC
	}
	var (
		mu      sync.Mutex
		started = time.Now()
	)
	sctx, stopSampling := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			s := SoakSample{At: time.Since(started), RSS: map[string]uint64{}}
			for role, p := range watch {
				if st, err := procstat.Read(p.PID()); err == nil {
					s.RSS[role] = st.RSS
				}
			}
			mu.Lock()
			rep.Samples = append(rep.Samples, s)
			mu.Unlock()
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	rep.Outcome = l.runOne(ctx, spec)
	stopSampling()
	<-done
	store, err := OpenStore(l.cfg.DBPath)
	if err != nil {
		return rep, err
	}
	if store != nil {
		defer store.Close()
		if err := store.Insert(rep.Outcome.Run); err != nil {
			return rep, err
		}
	}
	rep.Trends = trends(rep.Samples, spec.Warmup)
	if err := writeSoakCSV(rep.CSV, rep.Samples); err != nil {
		return rep, err
	}
	return rep, nil
}

// CheckSoak says why s cannot be soaked with samples every interval: a soak
// is one run (one mode, connection count and rate, one repetition) with at
// least one sidecar to watch.
func CheckSoak(s *scenario.Scenario, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("the sampling interval must be more than 0, got %s", interval)
	}
	specs := s.Expand()
	if len(specs) != 1 {
		return fmt.Errorf("scenario %s makes %d runs; a soak is one (one mode, connection count and rate, one repetition)", s.Name, len(specs))
	}
	if c, srv := specs[0].Mode.Sidecars(); !c && !srv {
		return fmt.Errorf("mode %s has no sidecar to watch", specs[0].Mode)
	}
	return nil
}

// trends fits each sidecar's RSS against time over the samples after
// warmup (allocators and pools grow while traffic starts; that is not a
// leak), or over all of them if the warm-up left fewer than three.
func trends(samples []SoakSample, warmup time.Duration) []SidecarTrend {
	var out []SidecarTrend
	for _, role := range []string{clientSidecar, serverSidecar} {
		var all, fit []SoakSample
		for _, s := range samples {
			if _, ok := s.RSS[role]; ok {
				all = append(all, s)
				if s.At >= warmup {
					fit = append(fit, s)
				}
			}
		}
		if len(all) == 0 {
			continue
		}
		if len(fit) < 3 {
			fit = all
		}
		tr := SidecarTrend{Role: role, StartMB: mb(all[0].RSS[role]), EndMB: mb(all[len(all)-1].RSS[role]), Fitted: len(fit)}
		xs, ys := make([]float64, len(fit)), make([]float64, len(fit))
		for i, s := range fit {
			xs[i], ys[i] = s.At.Minutes(), mb(s.RSS[role])
		}
		for _, s := range all {
			tr.MaxMB = math.Max(tr.MaxMB, mb(s.RSS[role]))
		}
		tr.SlopeMBPer10Min = 10 * slope(xs, ys)
		out = append(out, tr)
	}
	return out
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// slope is the least-squares slope of ys against xs; 0 with fewer than two
// distinct xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

func writeSoakCSV(path string, samples []SoakSample) error {
	return writeFile(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"seconds", "client_sidecar_rss_mb", "server_sidecar_rss_mb"})
		for _, s := range samples {
			row := []string{strconv.FormatFloat(s.At.Seconds(), 'f', 1, 64)}
			for _, role := range []string{clientSidecar, serverSidecar} {
				v := ""
				if b, ok := s.RSS[role]; ok {
					v = strconv.FormatFloat(mb(b), 'f', 3, 64)
				}
				row = append(row, v)
			}
			_ = cw.Write(row)
		}
		cw.Flush()
		return cw.Error()
	})
}

// Print writes the soak's summary: the run, its errors by code, and each
// sidecar's memory trend.
func (r *SoakReport) Print(w io.Writer) {
	run, spec := r.Outcome.Run, r.Spec
	fmt.Fprintf(w, "meshperf lab soak: %s at %d qps, %d connections, %s, %s, mTLS %v, network %s\n",
		spec.Duration, spec.QPS, spec.Connections, spec.Mode, spec.Protocol, spec.MTLS, r.Network)
	fmt.Fprintf(w, "  calls %d, errors %d (%.3f%%), codes %v\n", run.Calls, run.Errors, run.ErrorPercent, run.Codes)
	if run.Failed {
		fmt.Fprintf(w, "  run failed: %s\n", run.FailureReason)
	}
	for _, t := range r.Trends {
		fmt.Fprintf(w, "  %s RSS: start %.1f MB, end %.1f MB, max %.1f MB; trend %+.3f MB per 10 min (%d samples after the warm-up)\n",
			t.Role, t.StartMB, t.EndMB, t.MaxMB, t.SlopeMBPer10Min, t.Fitted)
	}
	fmt.Fprintf(w, "samples every %s: %s\n", r.Interval, r.CSV)
}

// SoakInterval is how often a soak samples memory unless told otherwise:
// 60 points in 10 minutes, plenty for a slope, and cheap.
const SoakInterval = 10 * time.Second
