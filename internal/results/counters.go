package results

import (
	"database/sql"
	"math"
)

// ProcessCounters are what a process spent per request and how its CPU
// splits, the counts a proxy's performance work is done by (meshperf bench
// proxy, and the lab where it can read them): where CPU goes (user space
// against the kernel's reads, writes and wake-ups), how often its threads
// sleep and are woken or preempted, how many heap allocations a request
// costs. A figure that was not measured is NaN.
type ProcessCounters struct {
	UserVCPU   float64 `json:"user_vcpu"`   // user-space CPU seconds per second of the window
	SystemVCPU float64 `json:"system_vcpu"` // kernel CPU seconds per second on its behalf
	// Per request, over the same window (requests the load generator
	// completed through the process).
	SyscallsPerRequest            float64 `json:"syscalls_per_request"`
	VoluntarySwitchesPerRequest   float64 `json:"voluntary_switches_per_request"`   // a thread blocked: a wake-up follows
	InvoluntarySwitchesPerRequest float64 `json:"involuntary_switches_per_request"` // a thread was preempted
	AllocationsPerRequest         float64 `json:"allocations_per_request"`          // heap allocations (meshperf-proxy counts its own)
}

// UnknownCounters has every figure unknown; a measurement fills in what it
// has.
func UnknownCounters() ProcessCounters {
	nan := math.NaN()
	return ProcessCounters{nan, nan, nan, nan, nan, nan}
}

// migrationCounters (schema 8 -> 9) adds the per-process counters to the
// processes table, NULL when unknown (every process stored before schema
// 9, and a process whose run did not count them).
const migrationCounters = `ALTER TABLE processes ADD COLUMN user_vcpu REAL;
ALTER TABLE processes ADD COLUMN system_vcpu REAL;
ALTER TABLE processes ADD COLUMN syscalls_per_request REAL;
ALTER TABLE processes ADD COLUMN voluntary_switches_per_request REAL;
ALTER TABLE processes ADD COLUMN involuntary_switches_per_request REAL;
ALTER TABLE processes ADD COLUMN allocations_per_request REAL;`

// counterColumns are the processes columns ProcessCounters fill, in the
// order of values and scanTargets.
const counterColumns = `user_vcpu, system_vcpu, syscalls_per_request, voluntary_switches_per_request,
	involuntary_switches_per_request, allocations_per_request`

// counterValues are c's columns for an INSERT; nil stores NULL in all.
func counterValues(c *ProcessCounters) []any {
	if c == nil {
		return []any{nil, nil, nil, nil, nil, nil}
	}
	return []any{nullable(c.UserVCPU), nullable(c.SystemVCPU), nullable(c.SyscallsPerRequest),
		nullable(c.VoluntarySwitchesPerRequest), nullable(c.InvoluntarySwitchesPerRequest), nullable(c.AllocationsPerRequest)}
}

// countersFromNull reads the columns back: nil when every one is NULL.
func countersFromNull(v [6]sql.NullFloat64) *ProcessCounters {
	known := false
	for _, x := range v {
		known = known || x.Valid
	}
	if !known {
		return nil
	}
	return &ProcessCounters{fromNull(v[0]), fromNull(v[1]), fromNull(v[2]), fromNull(v[3]), fromNull(v[4]), fromNull(v[5])}
}
