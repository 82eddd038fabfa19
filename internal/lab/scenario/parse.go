package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/meshperf/meshperf/internal/strictyaml"
)

// Duration is a time.Duration that reads from YAML as a Go duration string
// ("30s", "1m30s") or, as in Istio's harness configs, a number of seconds.
type Duration time.Duration

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "30s" or 30 (seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil && string(b) != "null" {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use a form like 30s or 1m30s)", s)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || string(b) == "null" {
		return fmt.Errorf("expected a duration such as 30s or a number of seconds, got %s", strictyaml.Describe(b))
	}
	if math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		return fmt.Errorf("%v seconds is out of range", f)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// decoder decodes one top-level key into the scenario.
type decoder struct {
	key    string
	decode func(s *Scenario, raw json.RawMessage) error
}

// fields are the keys a scenario file may have, in the order errors list them.
var fields = []decoder{
	{"name", func(s *Scenario, r json.RawMessage) error { return strictyaml.Text(r, &s.Name) }},
	{"description", func(s *Scenario, r json.RawMessage) error { return strictyaml.Text(r, &s.Description) }},
	{"connections", func(s *Scenario, r json.RawMessage) error { return decodeInts("connections", r, &s.Connections) }},
	{"qps", func(s *Scenario, r json.RawMessage) error { return decodeInts("qps", r, &s.QPS) }},
	{"duration", func(s *Scenario, r json.RawMessage) error { return s.Duration.UnmarshalJSON(r) }},
	{"warmup", func(s *Scenario, r json.RawMessage) error { return s.Warmup.UnmarshalJSON(r) }},
	{"cooldown", func(s *Scenario, r json.RawMessage) error { return s.Cooldown.UnmarshalJSON(r) }},
	{"payloadSize", func(s *Scenario, r json.RawMessage) error { return strictyaml.WholeNumber(r, &s.PayloadSize) }},
	{"protocol", func(s *Scenario, r json.RawMessage) error { return strictyaml.Text(r, (*string)(&s.Protocol)) }},
	{"modes", decodeModes},
	{"mtls", func(s *Scenario, r json.RawMessage) error { return strictyaml.Bool(r, &s.MTLS) }},
	{"accessLog", func(s *Scenario, r json.RawMessage) error { return strictyaml.Bool(r, &s.AccessLog) }},
	{"proxyConcurrency", func(s *Scenario, r json.RawMessage) error { return strictyaml.WholeNumber(r, &s.ProxyConcurrency) }},
	{"proxyCPULimit", func(s *Scenario, r json.RawMessage) error { return decodeCPU(r, &s.ProxyCPULimit) }},
	{"repetitions", func(s *Scenario, r json.RawMessage) error { return strictyaml.WholeNumber(r, &s.Repetitions) }},
	{"jitter", func(s *Scenario, r json.RawMessage) error { return strictyaml.Bool(r, &s.Jitter) }},
	{"uniform", func(s *Scenario, r json.RawMessage) error { return strictyaml.Bool(r, &s.Uniform) }},
	{"timeout", func(s *Scenario, r json.RawMessage) error { return s.Timeout.UnmarshalJSON(r) }},
	{"topology", func(s *Scenario, r json.RawMessage) error { return strictyaml.Text(r, &s.Topology) }},
	{"replicas", func(s *Scenario, r json.RawMessage) error { return strictyaml.WholeNumber(r, &s.Replicas) }},
	{"app", func(s *Scenario, r json.RawMessage) error { return strictyaml.Text(r, &s.App) }},
}

// Parse reads a scenario file's bytes, fills in defaults and validates it.
// source names the file in errors ("latency.yaml"); a scenario without a
// name takes source's base name. Every error is one line that starts with
// "scenario <source>: " and names the field.
func Parse(source string, data []byte) (*Scenario, error) {
	s, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", source, err)
	}
	if s.Name == "" {
		s.Name = nameFromSource(source)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", source, err)
	}
	if s.IsGraph() {
		if err := s.resolveTopology(filepath.Dir(source)); err != nil {
			return nil, fmt.Errorf("scenario %s: %w", source, err)
		}
	}
	return s, nil
}

func decode(data []byte) (*Scenario, error) {
	js, err := strictyaml.ToJSON(data)
	if err != nil {
		return nil, err
	}
	if len(js) == 0 || string(js) == "null" {
		return nil, errors.New("the file is empty; it needs at least connections and qps")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, errors.New("expected a mapping of fields (name, connections, qps, ...) at the top level")
	}
	if err := unknownKeys(top); err != nil {
		return nil, err
	}
	s := defaults()
	for _, f := range fields {
		raw, ok := top[f.key]
		if !ok {
			continue
		}
		if err := f.decode(&s, raw); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return nil, fe
			}
			return nil, fieldErr(f.key, "%s", err)
		}
	}
	if _, ok := top["warmup"]; !ok {
		s.Warmup = Duration(defaultWarmup(s.Duration.D()))
	}
	if s.IsGraph() {
		// A graph's defaults: the modes that apply to it, and no echo
		// payload (its services answer their own sizes).
		if _, ok := top["modes"]; !ok {
			s.Modes = append([]Mode(nil), defaultGraphModes...)
		}
		if _, ok := top["payloadSize"]; !ok {
			s.PayloadSize = 0
		}
	}
	return &s, nil
}

func unknownKeys(top map[string]json.RawMessage) error {
	var unknown []string
	for k := range top {
		if !knownKey(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return strictyaml.UnknownField(unknown[0], unknown[0], knownKeys())
}

func knownKey(k string) bool {
	for _, f := range fields {
		if f.key == k {
			return true
		}
	}
	return false
}

func knownKeys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// decodeInts reads a list of whole numbers; a single number is taken as a
// one-element list, since "qps: 1000" is what people write.
func decodeInts(key string, raw json.RawMessage, dst *[]int) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var one int
		if err := strictyaml.WholeNumber(raw, &one); err != nil {
			return fmt.Errorf("expected a list of whole numbers, got %s", strictyaml.Describe(raw))
		}
		*dst = []int{one}
		return nil
	}
	out := make([]int, len(items))
	for i, item := range items {
		if err := strictyaml.WholeNumber(item, &out[i]); err != nil {
			return fieldErr(fmt.Sprintf("%s[%d]", key, i), "%s", err)
		}
	}
	*dst = out
	return nil
}

func decodeModes(s *Scenario, raw json.RawMessage) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var one string
		if strictyaml.Text(raw, &one) != nil {
			return fmt.Errorf("expected a list of modes, got %s", strictyaml.Describe(raw))
		}
		items = []json.RawMessage{raw}
	}
	out := make([]Mode, len(items))
	for i, item := range items {
		if err := strictyaml.Text(item, (*string)(&out[i])); err != nil {
			return fieldErr(fmt.Sprintf("modes[%d]", i), "%s", err)
		}
	}
	s.Modes = out
	return nil
}

func nameFromSource(source string) string {
	base := source[strings.LastIndexAny(source, `/\`)+1:]
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	return base
}

// decodeCPU reads a CPU amount as Kubernetes writes one: a quantity such
// as "500m" or "1.5", or a bare number of CPUs.
func decodeCPU(raw json.RawMessage, dst *float64) error {
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil {
			return fmt.Errorf("want a number of CPUs or a quantity such as 500m")
		}
		*dst = n
		return nil
	}
	cpus, err := ParseCPU(text)
	if err != nil {
		return err
	}
	*dst = cpus
	return nil
}

// ParseCPU reads a Kubernetes CPU quantity ("500m", "2", "0.25") as a
// number of CPUs.
func ParseCPU(text string) (float64, error) {
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU quantity (e.g. 500m or 0.5)", text)
	}
	return q.AsApproximateFloat64(), nil
}
