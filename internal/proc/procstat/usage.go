package procstat

import (
	"fmt"
	"time"
)

// Usage is what a process cost between two samples.
type Usage struct {
	Wall time.Duration // time between the samples
	CPU  time.Duration // CPU time used between them
	// VCPU is CPU per wall-clock second: 1.0 is one core kept busy.
	VCPU float64
	// UserVCPU and SystemVCPU split VCPU into user space and the kernel.
	UserVCPU, SystemVCPU float64
	// Context switches of all threads between the samples; valid if
	// SwitchesKnown (both samples had them).
	VoluntarySwitches, InvoluntarySwitches uint64
	SwitchesKnown                          bool
	RSS                                    uint64 // at the later sample, bytes
	PSS                                    uint64 // at the later sample, bytes; valid if PSSKnown
	PSSKnown                               bool
	MaxHWM                                 uint64 // the larger peak RSS of the two, bytes
}

// Between computes a process's usage from two samples of it, before then
// after.
func Between(before, after Sample) (Usage, error) {
	if before.PID != after.PID || before.StartTicks != after.StartTicks {
		return Usage{}, fmt.Errorf("usage: samples are of different processes (pid %d started at %d, pid %d started at %d)",
			before.PID, before.StartTicks, after.PID, after.StartTicks)
	}
	wall := after.At.Sub(before.At)
	if wall <= 0 {
		return Usage{}, fmt.Errorf("usage: pid %d: the second sample is not later than the first", before.PID)
	}
	cpu := max(after.CPU-before.CPU, 0)
	u := Usage{
		Wall:       wall,
		CPU:        cpu,
		VCPU:       cpu.Seconds() / wall.Seconds(),
		UserVCPU:   max(after.UserCPU-before.UserCPU, 0).Seconds() / wall.Seconds(),
		SystemVCPU: max(after.SystemCPU-before.SystemCPU, 0).Seconds() / wall.Seconds(),
		RSS:        after.RSS,
		PSS:        after.PSS,
		PSSKnown:   after.PSSKnown,
		MaxHWM:     max(before.HWM, after.HWM),
	}
	if before.SwitchesKnown && after.SwitchesKnown {
		// A thread that exited takes its counts with it; never go negative.
		u.VoluntarySwitches = after.VoluntarySwitches - min(before.VoluntarySwitches, after.VoluntarySwitches)
		u.InvoluntarySwitches = after.InvoluntarySwitches - min(before.InvoluntarySwitches, after.InvoluntarySwitches)
		u.SwitchesKnown = true
	}
	return u, nil
}
