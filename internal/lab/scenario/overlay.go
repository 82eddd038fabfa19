package scenario

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Overrides are command-line values laid over a scenario; nil or empty
// fields leave the scenario's value alone. The comments name the flag each
// field stands for; FlagName maps a scenario field to it, so that errors
// name what the person typed.
type Overrides struct {
	Connections      []int          // -conn 2,4,8
	QPS              []int          // -qps 500,1000 (0: max)
	Modes            []Mode         // -modes no-mesh,both-sidecars
	Duration         *time.Duration // -duration
	Warmup           *time.Duration // -warmup
	PayloadSize      *int           // -size
	Protocol         *Protocol      // -protocol
	MTLS             *bool          // -mtls
	AccessLog        *bool          // -access-log
	ProxyConcurrency *int           // -concurrency
	ProxyCPULimit    *float64       // -proxy-cpu-limit
	Repetitions      *int           // -repetitions
}

// flagNames maps scenario fields to the flags the CLI gives them.
var flagNames = map[string]string{
	"connections": "-conn", "qps": "-qps", "modes": "-modes",
	"duration": "-duration", "warmup": "-warmup", "payloadSize": "-size",
	"protocol": "-protocol", "mtls": "-mtls", "accessLog": "-access-log",
	"proxyConcurrency": "-concurrency", "repetitions": "-repetitions",
	"proxyCPULimit": "-proxy-cpu-limit",
}

// FlagName is the flag that sets a scenario field ("connections" -> "-conn").
func FlagName(field string) string {
	if f, ok := flagNames[field]; ok {
		return f
	}
	return field
}

// Apply returns a copy of s with the overrides laid over it, validated. A
// shorter -duration without -warmup shrinks the warm-up to the default for
// that duration when the scenario's would no longer fit, rather than
// failing on a value the person did not type. Errors name the flag:
// "flag -conn: connections[1]: must be at least 1, got 0".
func (s *Scenario) Apply(o Overrides) (*Scenario, error) {
	c := *s
	c.Connections = override(s.Connections, o.Connections)
	c.QPS = override(s.QPS, o.QPS)
	c.Modes = override(s.Modes, o.Modes)
	if o.Duration != nil {
		c.Duration = Duration(*o.Duration)
		if o.Warmup == nil && c.Warmup >= c.Duration {
			c.Warmup = Duration(defaultWarmup(*o.Duration))
		}
	}
	setIf(&c.Warmup, o.Warmup, func(d time.Duration) Duration { return Duration(d) })
	setIf(&c.PayloadSize, o.PayloadSize, same[int])
	setIf(&c.Protocol, o.Protocol, same[Protocol])
	setIf(&c.MTLS, o.MTLS, same[bool])
	setIf(&c.AccessLog, o.AccessLog, same[bool])
	setIf(&c.ProxyConcurrency, o.ProxyConcurrency, same[int])
	setIf(&c.ProxyCPULimit, o.ProxyCPULimit, same[float64])
	setIf(&c.Repetitions, o.Repetitions, same[int])
	if err := c.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			root := fe.Field
			if i := strings.IndexByte(root, '['); i >= 0 {
				root = root[:i]
			}
			if _, ok := flagNames[root]; ok && o.sets(root) {
				return nil, fmt.Errorf("flag %s: %w", FlagName(root), err)
			}
		}
		return nil, fmt.Errorf("scenario %s with flags: %w", s.Name, err)
	}
	return &c, nil
}

// sets says whether the overrides give a value for the scenario field.
func (o Overrides) sets(field string) bool {
	switch field {
	case "connections":
		return len(o.Connections) > 0
	case "qps":
		return len(o.QPS) > 0
	case "modes":
		return len(o.Modes) > 0
	case "duration":
		return o.Duration != nil
	case "warmup":
		return o.Warmup != nil || o.Duration != nil
	case "payloadSize":
		return o.PayloadSize != nil
	case "protocol":
		return o.Protocol != nil
	case "proxyConcurrency":
		return o.ProxyConcurrency != nil
	case "proxyCPULimit":
		return o.ProxyCPULimit != nil
	case "repetitions":
		return o.Repetitions != nil
	}
	return false
}

func override[T any](cur, o []T) []T {
	if len(o) > 0 {
		return append([]T(nil), o...)
	}
	return append([]T(nil), cur...)
}

func setIf[T, F any](dst *T, v *F, conv func(F) T) {
	if v != nil {
		*dst = conv(*v)
	}
}

func same[T any](v T) T { return v }

// ParseIntList parses a flag's comma-separated whole numbers ("2,4, 8").
// Errors name the flag and the item: "flag -conn: item 2 ("x"): not a whole
// number". Range checks are Apply's, so that they read the same as a file's.
func ParseIntList(flag, value string) ([]int, error) {
	items, err := splitList(flag, value)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(items))
	for i, it := range items {
		n, err := strconv.Atoi(it)
		if err != nil {
			return nil, fmt.Errorf("flag %s: item %d (%q): not a whole number", flag, i+1, it)
		}
		out[i] = n
	}
	return out, nil
}

// ParseModes parses a flag's comma-separated modes ("no-mesh,both-sidecars").
// Istio's words (baseline, serveronly, clientonly, both) are accepted too.
func ParseModes(flag, value string) ([]Mode, error) {
	items, err := splitList(flag, value)
	if err != nil {
		return nil, err
	}
	out := make([]Mode, len(items))
	for i, it := range items {
		m, ok := modeByName(it)
		if !ok {
			return nil, fmt.Errorf("flag %s: item %d (%q): not one of %s", flag, i+1, it, joinNames(modes))
		}
		out[i] = m
	}
	return out, nil
}

// ParseProtocol checks a -protocol value.
func ParseProtocol(flag, value string) (Protocol, error) {
	p := Protocol(strings.ToLower(strings.TrimSpace(value)))
	for _, x := range protocols {
		if p == x {
			return p, nil
		}
	}
	return "", fmt.Errorf("flag %s: %q is not one of %s", flag, value, joinNames(protocols))
}

func modeByName(name string) (Mode, bool) {
	for _, m := range modes {
		if name == string(m) || name == m.IstioLabel() {
			return m, true
		}
	}
	return "", false
}

func splitList(flag, value string) ([]string, error) {
	if strings.TrimSpace(value) == "" {
		return nil, fmt.Errorf("flag %s: empty list", flag)
	}
	parts := strings.Split(value, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, fmt.Errorf("flag %s: item %d is empty", flag, i+1)
		}
	}
	return parts, nil
}
