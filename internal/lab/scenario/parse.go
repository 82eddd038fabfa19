package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
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
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use a form like 30s or 1m30s)", s)
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("expected a duration such as 30s or a number of seconds, got %s", describe(b))
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
	{"name", func(s *Scenario, r json.RawMessage) error { return decodeString(r, &s.Name) }},
	{"description", func(s *Scenario, r json.RawMessage) error { return decodeString(r, &s.Description) }},
	{"connections", func(s *Scenario, r json.RawMessage) error { return decodeInts("connections", r, &s.Connections) }},
	{"qps", func(s *Scenario, r json.RawMessage) error { return decodeInts("qps", r, &s.QPS) }},
	{"duration", func(s *Scenario, r json.RawMessage) error { return s.Duration.UnmarshalJSON(r) }},
	{"warmup", func(s *Scenario, r json.RawMessage) error { return s.Warmup.UnmarshalJSON(r) }},
	{"cooldown", func(s *Scenario, r json.RawMessage) error { return s.Cooldown.UnmarshalJSON(r) }},
	{"payloadSize", func(s *Scenario, r json.RawMessage) error { return decodeInt(r, &s.PayloadSize) }},
	{"protocol", func(s *Scenario, r json.RawMessage) error { return decodeString(r, (*string)(&s.Protocol)) }},
	{"modes", decodeModes},
	{"mtls", func(s *Scenario, r json.RawMessage) error { return decodeBool(r, &s.MTLS) }},
	{"accessLog", func(s *Scenario, r json.RawMessage) error { return decodeBool(r, &s.AccessLog) }},
	{"proxyConcurrency", func(s *Scenario, r json.RawMessage) error { return decodeInt(r, &s.ProxyConcurrency) }},
	{"repetitions", func(s *Scenario, r json.RawMessage) error { return decodeInt(r, &s.Repetitions) }},
	{"jitter", func(s *Scenario, r json.RawMessage) error { return decodeBool(r, &s.Jitter) }},
	{"uniform", func(s *Scenario, r json.RawMessage) error { return decodeBool(r, &s.Uniform) }},
	{"timeout", func(s *Scenario, r json.RawMessage) error { return s.Timeout.UnmarshalJSON(r) }},
	{"topology", func(s *Scenario, r json.RawMessage) error { return decodeString(r, &s.Topology) }},
	{"replicas", func(s *Scenario, r json.RawMessage) error { return decodeInt(r, &s.Replicas) }},
	{"app", func(s *Scenario, r json.RawMessage) error { return decodeString(r, &s.App) }},
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
	// YAMLToJSONStrict rejects duplicate keys, which plain YAML would let the
	// last one win silently.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, oneLine(err)
	}
	js = bytes.TrimSpace(js)
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
			return nil, &FieldError{Field: f.key, Problem: err.Error()}
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
	k := unknown[0]
	msg := "unknown field"
	if guess := closestKey(k); guess != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", guess)
	} else {
		msg += " (known: " + strings.Join(knownKeys(), ", ") + ")"
	}
	return &FieldError{Field: k, Problem: msg}
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

// closestKey suggests a known key that differs only in case, '_' or '-', or
// by a small edit, for the common typos (conections, payload_size).
func closestKey(k string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	best, bestDist := "", 3
	for _, f := range fields {
		if norm(f.key) == norm(k) {
			return f.key
		}
		if d := editDistance(norm(f.key), norm(k)); d < bestDist {
			best, bestDist = f.key, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func decodeString(raw json.RawMessage, dst *string) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("expected text, got %s", describe(raw))
	}
	return nil
}

func decodeBool(raw json.RawMessage, dst *bool) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("expected true or false, got %s", describe(raw))
	}
	return nil
}

func decodeInt(raw json.RawMessage, dst *int) error {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("expected a whole number, got %s", describe(raw))
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("expected a whole number, got %s", describe(raw))
	}
	*dst = int(f)
	return nil
}

// decodeInts reads a list of whole numbers; a single number is taken as a
// one-element list, since "qps: 1000" is what people write.
func decodeInts(key string, raw json.RawMessage, dst *[]int) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var one int
		if err := decodeInt(raw, &one); err != nil {
			return fmt.Errorf("expected a list of whole numbers, got %s", describe(raw))
		}
		*dst = []int{one}
		return nil
	}
	out := make([]int, len(items))
	for i, item := range items {
		if err := decodeInt(item, &out[i]); err != nil {
			return &FieldError{Field: fmt.Sprintf("%s[%d]", key, i), Problem: err.Error()}
		}
	}
	*dst = out
	return nil
}

func decodeModes(s *Scenario, raw json.RawMessage) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		var one string
		if decodeString(raw, &one) != nil {
			return fmt.Errorf("expected a list of modes, got %s", describe(raw))
		}
		items = []json.RawMessage{raw}
	}
	out := make([]Mode, len(items))
	for i, item := range items {
		if err := decodeString(item, (*string)(&out[i])); err != nil {
			return &FieldError{Field: fmt.Sprintf("modes[%d]", i), Problem: err.Error()}
		}
	}
	s.Modes = out
	return nil
}

// describe names a JSON value's kind for an error, with the value when short.
func describe(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	kind := "a value"
	switch {
	case t == "null":
		return "nothing (null)"
	case strings.HasPrefix(t, "\""):
		kind = "text"
	case strings.HasPrefix(t, "["):
		return "a list"
	case strings.HasPrefix(t, "{"):
		return "a mapping"
	case t == "true" || t == "false":
		kind = "a boolean"
	default:
		kind = "a number"
	}
	if len(t) > 40 {
		return kind
	}
	return kind + " " + t
}

var lineRE = regexp.MustCompile(`\s+`)

// oneLine folds a YAML parser error onto one line (they sometimes span two).
func oneLine(err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	return errors.New("not valid YAML: " + lineRE.ReplaceAllString(strings.TrimSpace(msg), " "))
}

func nameFromSource(source string) string {
	base := source[strings.LastIndexAny(source, `/\`)+1:]
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
	return base
}
