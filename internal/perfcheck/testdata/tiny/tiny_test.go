// Package tiny has benchmarks whose verdicts against bench.baseline cannot
// depend on the machine: each sleeps 1 ms, and the baseline says 1 ns
// (so it is worse) or 1 s (so it is better).
package tiny

import (
	"testing"
	"time"
)

func BenchmarkSleepAgainst1ns(b *testing.B) {
	for b.Loop() {
		time.Sleep(time.Millisecond)
	}
}

func BenchmarkSleepAgainst1s(b *testing.B) {
	for b.Loop() {
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkAdded has no baseline: it is new.
func BenchmarkAdded(b *testing.B) {
	for b.Loop() {
		time.Sleep(time.Millisecond)
	}
}
