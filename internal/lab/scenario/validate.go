package scenario

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Limits a scenario must stay within. They catch typos (an extra zero) and
// values this one-machine lab cannot honour, not taste.
const (
	MaxConnections      = 4096
	MaxQPS              = 1_000_000
	MaxPayloadSize      = 16 << 20
	MaxProxyConcurrency = 64
	// A proxy's CPU limit: the kubelet's smallest useful quota (10m) to
	// the largest machine a lab runs on.
	MinProxyCPULimit = 0.01
	MaxProxyCPULimit = 64.0
	MaxRepetitions   = 100
	MaxDuration      = 24 * time.Hour
	// MaxRuns bounds the matrix (repetitions × modes × connections × qps),
	// which would otherwise be unbounded in the product of four lists.
	MaxRuns = 10_000
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Validate checks the scenario; the error names the first bad field.
func (s *Scenario) Validate() error {
	checks := []func() error{
		s.validateName, s.validateConnections, s.validateQPS, s.validateTimes,
		s.validatePayload, s.validateProtocol, s.validateModes, s.validateCounts,
		s.validateSize, s.validateGraph,
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scenario) validateName() error {
	if !nameRE.MatchString(s.Name) {
		return fieldErr("name", "%q must be 1 to 63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
	}
	return nil
}

func (s *Scenario) validateConnections() error {
	return validateInts("connections", s.Connections, 1, MaxConnections)
}

func (s *Scenario) validateQPS() error {
	return validateInts("qps", s.QPS, 0, MaxQPS)
}

func validateInts(field string, v []int, lo, hi int) error {
	if len(v) == 0 {
		return fieldErr(field, "needs at least one value")
	}
	seen := map[int]int{}
	for i, x := range v {
		item := fmt.Sprintf("%s[%d]", field, i)
		if x < lo {
			return fieldErr(item, "must be at least %d, got %d", lo, x)
		}
		if x > hi {
			return fieldErr(item, "must be at most %d, got %d", hi, x)
		}
		if j, dup := seen[x]; dup {
			return fieldErr(item, "%d is already %s[%d]", x, field, j)
		}
		seen[x] = i
	}
	return nil
}

func (s *Scenario) validateTimes() error {
	d, w := s.Duration.D(), s.Warmup.D()
	switch {
	case d <= 0:
		return fieldErr("duration", "must be positive, got %v", d)
	case d > MaxDuration:
		return fieldErr("duration", "must be at most %v, got %v", MaxDuration, d)
	case w < 0:
		return fieldErr("warmup", "must not be negative, got %v", w)
	case w >= d:
		return fieldErr("warmup", "must be shorter than duration (%v), got %v", d, w)
	case s.Cooldown.D() < 0:
		return fieldErr("cooldown", "must not be negative, got %v", s.Cooldown.D())
	case s.Cooldown.D() > time.Hour:
		return fieldErr("cooldown", "must be at most 1h, got %v", s.Cooldown.D())
	case s.Timeout.D() <= 0:
		return fieldErr("timeout", "must be positive, got %v", s.Timeout.D())
	}
	return nil
}

func (s *Scenario) validatePayload() error {
	if s.PayloadSize < 0 || s.PayloadSize > MaxPayloadSize {
		return fieldErr("payloadSize", "must be 0 to %d bytes, got %d", MaxPayloadSize, s.PayloadSize)
	}
	return nil
}

func (s *Scenario) validateProtocol() error {
	for _, p := range protocols {
		if s.Protocol == p {
			return nil
		}
	}
	return fieldErr("protocol", "%q is not one of %s", s.Protocol, joinNames(protocols))
}

func (s *Scenario) validateModes() error {
	if len(s.Modes) == 0 {
		return fieldErr("modes", "needs at least one of %s", joinNames(modes))
	}
	seen := map[Mode]int{}
	for i, m := range s.Modes {
		item := fmt.Sprintf("modes[%d]", i)
		if !knownMode(m) {
			return fieldErr(item, "%q is not one of %s", m, joinNames(modes))
		}
		if j, dup := seen[m]; dup {
			return fieldErr(item, "%s is already modes[%d]", m, j)
		}
		seen[m] = i
	}
	return nil
}

func knownMode(m Mode) bool {
	for _, x := range modes {
		if m == x {
			return true
		}
	}
	return false
}

func (s *Scenario) validateCounts() error {
	if s.ProxyConcurrency < 1 || s.ProxyConcurrency > MaxProxyConcurrency {
		return fieldErr("proxyConcurrency", "must be 1 to %d workers, got %d", MaxProxyConcurrency, s.ProxyConcurrency)
	}
	if s.ProxyCPULimit != 0 && (s.ProxyCPULimit < MinProxyCPULimit || s.ProxyCPULimit > MaxProxyCPULimit) {
		return fieldErr("proxyCPULimit", "must be %g to %g CPUs (0: no limit), got %g", MinProxyCPULimit, MaxProxyCPULimit, s.ProxyCPULimit)
	}
	if s.Repetitions < 1 || s.Repetitions > MaxRepetitions {
		return fieldErr("repetitions", "must be 1 to %d, got %d", MaxRepetitions, s.Repetitions)
	}
	return nil
}

func joinNames[T ~string](v []T) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

func (s *Scenario) validateSize() error {
	n := s.Repetitions * len(s.Modes) * len(s.Connections) * len(s.QPS)
	if n > MaxRuns {
		return fieldErr("connections, qps, modes, repetitions", "%d x %d x %d x %d = %d runs, more than %d",
			len(s.Connections), len(s.QPS), len(s.Modes), s.Repetitions, n, MaxRuns)
	}
	return nil
}
