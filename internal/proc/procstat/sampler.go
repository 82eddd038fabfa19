package procstat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Sampler samples a set of named processes periodically and keeps the
// samples, so that usage can be computed afterwards for any window — the
// lab picks the steady window after warm-up once the run is over. It is
// safe for concurrent use.
type Sampler struct {
	interval time.Duration
	read     func(pid int) (Sample, error)

	mu    sync.Mutex
	procs []*series
}

// series is everything known about one watched process.
type series struct {
	name    string
	pid     int
	start   uint64 // StartTicks of the first sample: detects pid reuse
	samples []Sample
	rounds  []time.Time // when each sample's round began: what windows select on
	goneAt  time.Time   // zero while alive
	lastErr error       // latest read failure other than exit
}

// NewSampler returns a sampler that samples every interval once Run is
// called (1s if interval is not positive).
func NewSampler(interval time.Duration) *Sampler {
	if interval <= 0 {
		interval = time.Second
	}
	ticks := ClockTicks()
	return &Sampler{
		interval: interval,
		read:     func(pid int) (Sample, error) { return ReadWithTicks(pid, ticks) },
	}
}

// Add starts watching pid under name, taking its first sample now.
func (s *Sampler) Add(name string, pid int) error {
	first, err := s.read(pid)
	if err != nil {
		return fmt.Errorf("watch %s: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.name == name {
			return fmt.Errorf("watch %s: a process with that name is already watched", name)
		}
	}
	s.procs = append(s.procs, &series{name: name, pid: pid, start: first.StartTicks,
		samples: []Sample{first}, rounds: []time.Time{first.At}})
	return nil
}

// Run samples every interval until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.SampleNow()
		}
	}
}

// SampleNow samples every live process at once and returns the time the
// round began, which is the time Window matches against: samples of a round
// returned as start or end fall inside [start, end]. Call it at the edges of
// a measurement window so the window's figures do not depend on where the
// periodic samples happened to fall.
func (s *Sampler) SampleNow() time.Time {
	s.mu.Lock()
	procs := append([]*series(nil), s.procs...)
	s.mu.Unlock()
	// Read outside the lock: smaps_rollup of a large process takes a while.
	now := time.Now()
	type result struct {
		p   *series
		smp Sample
		err error
	}
	var results []result
	for _, p := range procs {
		s.mu.Lock()
		gone := !p.goneAt.IsZero()
		s.mu.Unlock()
		if gone {
			continue
		}
		smp, err := s.read(p.pid)
		results = append(results, result{p, smp, err})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		switch {
		case errors.Is(r.err, ErrGone):
			r.p.goneAt = time.Now()
		case r.err != nil:
			r.p.lastErr = r.err
		case r.smp.StartTicks != r.p.start:
			// The pid now belongs to a new process: ours is gone.
			r.p.goneAt = r.smp.At
		default:
			r.p.samples = append(r.p.samples, r.smp)
			r.p.rounds = append(r.p.rounds, now)
		}
	}
	return now
}

// ProcessUsage is one process's cost over a window.
type ProcessUsage struct {
	Name string
	PID  int
	// Samples is how many samples fell inside the window; VCPU needs two.
	Samples int
	// Wall is the time between the first and last sample in the window,
	// CPU the CPU time used in it, and VCPU their ratio.
	Wall time.Duration
	CPU  time.Duration
	VCPU float64
	// UserVCPU and SystemVCPU split VCPU; the context switches of all its
	// threads over the window, valid if SwitchesKnown.
	UserVCPU, SystemVCPU                   float64
	VoluntarySwitches, InvoluntarySwitches uint64
	SwitchesKnown                          bool
	// Memory over the window's samples, bytes.
	MeanRSS, MaxRSS uint64
	MeanPSS, MaxPSS uint64
	PSSKnown        bool   // PSS was readable in every sample
	MaxHWM          uint64 // peak RSS the kernel recorded, up to the last sample
	// Gone reports that the process exited, first noticed at GoneAt; the
	// figures then cover only the part of the window it was alive.
	Gone   bool
	GoneAt time.Time
	// Err says why figures are missing (too few samples, read errors).
	Err error
}

// Window reports each watched process's usage over [start, end], in the
// order they were added.
func (s *Sampler) Window(start, end time.Time) []ProcessUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProcessUsage, 0, len(s.procs))
	for _, p := range s.procs {
		out = append(out, p.window(start, end))
	}
	return out
}

func (p *series) window(start, end time.Time) ProcessUsage {
	u := ProcessUsage{Name: p.name, PID: p.pid, Gone: !p.goneAt.IsZero(), GoneAt: p.goneAt}
	var in []Sample
	for i, smp := range p.samples {
		if r := p.rounds[i]; !r.Before(start) && !r.After(end) {
			in = append(in, smp)
		}
	}
	u.Samples = len(in)
	if len(in) == 0 {
		u.Err = fmt.Errorf("%s: no samples between %s and %s", p.name, start.Format(time.TimeOnly), end.Format(time.TimeOnly))
		if p.lastErr != nil {
			u.Err = fmt.Errorf("%w (last read error: %w)", u.Err, p.lastErr)
		}
		return u
	}
	var sumRSS, sumPSS float64
	u.PSSKnown = true
	for _, smp := range in {
		sumRSS += float64(smp.RSS)
		sumPSS += float64(smp.PSS)
		u.MaxRSS = max(u.MaxRSS, smp.RSS)
		u.MaxPSS = max(u.MaxPSS, smp.PSS)
		u.MaxHWM = max(u.MaxHWM, smp.HWM)
		u.PSSKnown = u.PSSKnown && smp.PSSKnown
	}
	u.MeanRSS = uint64(sumRSS / float64(len(in)))
	u.MeanPSS = uint64(sumPSS / float64(len(in)))
	if len(in) < 2 {
		u.Err = fmt.Errorf("%s: one sample in the window; CPU needs two (sample at the window's edges with SampleNow)", p.name)
		return u
	}
	usage, err := Between(in[0], in[len(in)-1])
	if err != nil {
		u.Err = err
		return u
	}
	u.Wall, u.CPU, u.VCPU = usage.Wall, usage.CPU, usage.VCPU
	u.UserVCPU, u.SystemVCPU = usage.UserVCPU, usage.SystemVCPU
	u.VoluntarySwitches, u.InvoluntarySwitches, u.SwitchesKnown = usage.VoluntarySwitches, usage.InvoluntarySwitches, usage.SwitchesKnown
	return u
}
