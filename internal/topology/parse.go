package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/strictyaml"
)

// FieldError is a problem with one field; Field is its path in the file, as
// "services[3] (svc-0-2).errorRate".
type FieldError = strictyaml.FieldError

var fieldErr = strictyaml.Errorf

// The keys each level of a file may set. isotope reads its files through
// encoding/json and drops every other key silently, so a typo
// ("errorrate", README's "default") would change nothing without a word;
// here it is an error. The ignored keys are those isotope's examples and
// README write but its code never reads: valid, and listed in
// Topology.Ignored.
var (
	topKeys          = []string{"services", "defaults"}
	topIgnored       = []string{"apiVersion", "kind"}
	defaultsKeys     = []string{"type", "errorRate", "responseSize", "script", "requestSize", "numReplicas"}
	serviceKeys      = []string{"name", "namespace", "cluster", "type", "numReplicas", "isEntrypoint", "errorRate", "responseSize", "script", "labels"}
	perServiceIgnore = []string{"numRbacPolicies", "computeUsage", "memoryUsage"}
	callKeys         = []string{"service", "hostname", "extra-header", "size", "probability"}
)

// MaxReplicas bounds numReplicas: each replica is a pod (a process, a
// network namespace, a sidecar) on this machine, so a larger number is a
// typo, not a plan.
const MaxReplicas = 1000

// Parse reads a topology file's bytes as isotope does, applies its defaults
// and validates the graph. source names the file in errors ("tree.yaml" or
// a path); the topology is named after its base name without .yaml. Every
// error is one line that starts with "topology <source>: " and names the
// field.
func Parse(data []byte, source string) (*Topology, error) {
	t, err := decode(data)
	if err == nil {
		err = t.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("topology %s: %w", source, err)
	}
	t.Name = nameFromSource(source)
	return t, nil
}

func nameFromSource(source string) string {
	base := source[strings.LastIndexAny(source, `/\`)+1:]
	return strings.TrimSuffix(strings.TrimSuffix(base, ".yaml"), ".yml")
}

func decode(data []byte) (*Topology, error) {
	js, err := strictyaml.ToJSON(data)
	if err != nil {
		return nil, err
	}
	if len(js) == 0 || string(js) == "null" {
		return nil, errors.New("the file is empty; it needs a list of services")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, errors.New("expected a mapping (services, defaults) at the top level")
	}
	t := &Topology{}
	if err := checkKeys(top, "", topKeys, topIgnored, &t.Ignored); err != nil {
		return nil, err
	}
	t.Defaults = Defaults{Type: HTTP, NumReplicas: 1}
	if raw, ok := top["defaults"]; ok {
		if err := decodeDefaults(raw, t); err != nil {
			return nil, err
		}
	}
	raw, ok := top["services"]
	if !ok {
		return nil, errors.New("services: missing; a topology needs at least one service")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fieldErr("services", "expected a list of services, got %s", strictyaml.Describe(raw))
	}
	for i, item := range items {
		s, err := decodeService(item, i, t)
		if err != nil {
			return nil, err
		}
		t.Services = append(t.Services, s)
	}
	return t, nil
}

// checkKeys refuses a key that is neither known nor ignored, naming it
// with its path, and records the ignored ones the mapping sets.
func checkKeys(m map[string]json.RawMessage, path string, known, ignored []string, record *[]string) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case contains(known, k):
		case contains(ignored, k):
			*record = append(*record, join(path, k))
		default:
			return strictyaml.UnknownField(join(path, k), k, known, ignored...)
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func decodeDefaults(raw json.RawMessage, t *Topology) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fieldErr("defaults", "expected a mapping of defaults, got %s", strictyaml.Describe(raw))
	}
	if err := checkKeys(m, "defaults", defaultsKeys, perServiceIgnore, &t.Ignored); err != nil {
		return err
	}
	d := &t.Defaults
	// requestSize first: it is the size of every call, those of
	// defaults.script included (isotope's code leaves those at 0, an
	// accident of its parse order, not a meaning).
	if r, ok := m["requestSize"]; ok {
		if err := decodeSize(r, &d.RequestSize); err != nil {
			return fieldErr("defaults.requestSize", "%v", err)
		}
	}
	if err := decodeCommon(m, "defaults", d.RequestSize, &d.Type, &d.NumReplicas, &d.ErrorRate, &d.ResponseSize, &d.Script); err != nil {
		return err
	}
	return nil
}

// decodeCommon reads the fields defaults and services share, each only
// when set, so that what is unset keeps the default already in place.
func decodeCommon(m map[string]json.RawMessage, path string, requestSize int64, typ *Protocol, replicas *int, errorRate *float64, responseSize *int64, script *Script) error {
	if r, ok := m["type"]; ok {
		var s string
		if json.Unmarshal(r, &s) != nil || (Protocol(s) != HTTP && Protocol(s) != GRPC) {
			return fieldErr(join(path, "type"), "expected http or grpc, got %s", strictyaml.Describe(r))
		}
		*typ = Protocol(s)
	}
	if r, ok := m["numReplicas"]; ok {
		if err := strictyaml.WholeNumber(r, replicas); err != nil {
			return fieldErr(join(path, "numReplicas"), "%v", err)
		}
		if *replicas < 1 || *replicas > MaxReplicas {
			return fieldErr(join(path, "numReplicas"), "%d is out of range: a service needs 1 to %d replicas (one pod each)", *replicas, MaxReplicas)
		}
	}
	if r, ok := m["errorRate"]; ok {
		if err := decodePercentage(r, errorRate); err != nil {
			return fieldErr(join(path, "errorRate"), "%v", err)
		}
	}
	if r, ok := m["responseSize"]; ok {
		if err := decodeSize(r, responseSize); err != nil {
			return fieldErr(join(path, "responseSize"), "%v", err)
		}
	}
	if r, ok := m["script"]; ok {
		s, err := decodeScript(r, join(path, "script"), requestSize)
		if err != nil {
			return err
		}
		*script = s
	}
	return nil
}

func decodeService(raw json.RawMessage, i int, t *Topology) (Service, error) {
	path := fmt.Sprintf("services[%d]", i)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Service{}, fieldErr(path, "expected a mapping with at least a name, got %s", strictyaml.Describe(raw))
	}
	d := t.Defaults
	s := Service{Type: d.Type, NumReplicas: d.NumReplicas, ErrorRate: d.ErrorRate, ResponseSize: d.ResponseSize, Script: d.Script}
	if r, ok := m["name"]; ok {
		if err := strictyaml.Text(r, &s.Name); err != nil {
			return s, fieldErr(path+".name", "%v", err)
		}
	}
	if s.Name == "" {
		return s, fieldErr(path+".name", "missing or empty; every service needs a name")
	}
	path += " (" + s.Name + ")"
	if err := checkKeys(m, path, serviceKeys, perServiceIgnore, &t.Ignored); err != nil {
		return s, err
	}
	if err := decodeStrings(m, path, []textField{{"namespace", &s.Namespace}, {"cluster", &s.Cluster}}); err != nil {
		return s, err
	}
	if r, ok := m["isEntrypoint"]; ok {
		if json.Unmarshal(r, &s.IsEntrypoint) != nil || string(r) == "null" {
			return s, fieldErr(join(path, "isEntrypoint"), "expected true or false, got %s", strictyaml.Describe(r))
		}
	}
	if r, ok := m["labels"]; ok {
		if json.Unmarshal(r, &s.Labels) != nil || s.Labels == nil {
			return s, fieldErr(join(path, "labels"), "expected a mapping of text to text (quote numbers: version: \"2\"), got %s", strictyaml.Describe(r))
		}
	}
	if err := decodeCommon(m, path, d.RequestSize, &s.Type, &s.NumReplicas, &s.ErrorRate, &s.ResponseSize, &s.Script); err != nil {
		return s, err
	}
	return s, nil
}

// decodeScript reads a list of steps; a step that is a list runs its
// steps concurrently, one level deep as isotope allows.
func decodeScript(raw json.RawMessage, path string, requestSize int64) (Script, error) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, fieldErr(path, "expected a list of steps, got %s", strictyaml.Describe(raw))
	}
	script := make(Script, 0, len(items))
	for i, item := range items {
		step, err := decodeStep(item, fmt.Sprintf("%s[%d]", path, i), requestSize, false)
		if err != nil {
			return nil, err
		}
		script = append(script, step)
	}
	return script, nil
}

func decodeStep(raw json.RawMessage, path string, requestSize int64, inConcurrent bool) (Step, error) {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		if inConcurrent {
			return Step{}, fieldErr(path, "concurrent steps may not be nested (a list inside a list of steps)")
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return Step{}, fieldErr(path, "expected a list of steps, got %s", strictyaml.Describe(raw))
		}
		if len(items) == 0 {
			return Step{}, fieldErr(path, "an empty list of concurrent steps does nothing; remove it")
		}
		var step Step
		for i, item := range items {
			inner, err := decodeStep(item, fmt.Sprintf("%s[%d]", path, i), requestSize, true)
			if err != nil {
				return Step{}, err
			}
			step.Concurrent = append(step.Concurrent, inner)
		}
		return step, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return Step{}, fieldErr(path, "expected one of sleep: DURATION, call: SERVICE or a list of those run concurrently, got %s", strictyaml.Describe(raw))
	}
	var key string
	for k := range m {
		key = k
	}
	switch key {
	case "sleep":
		var s string
		if json.Unmarshal(m[key], &s) != nil {
			return Step{}, fieldErr(path+".sleep", "expected a duration such as 10ms, got %s", strictyaml.Describe(m[key]))
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return Step{}, fieldErr(path+".sleep", "%q is not a duration of 0 or more (use a form like 10ms or 1.5s)", s)
		}
		return Step{Sleep: d}, nil
	case "call":
		c, err := decodeCall(m[key], path+".call", requestSize)
		if err != nil {
			return Step{}, err
		}
		return Step{Call: c}, nil
	}
	return Step{}, fieldErr(path+"."+key, "unknown step (a step is sleep: DURATION, call: SERVICE, or a list of those run concurrently)")
}

func decodeCall(raw json.RawMessage, path string, requestSize int64) (*Call, error) {
	c := &Call{Size: requestSize}
	var name string
	if json.Unmarshal(raw, &name) == nil {
		c.Service = name
	} else {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return nil, fieldErr(path, "expected a service name or a mapping (service, hostname, extra-header, size, probability), got %s", strictyaml.Describe(raw))
		}
		var ignored []string
		if err := checkKeys(m, path, callKeys, nil, &ignored); err != nil {
			return nil, err
		}
		if err := decodeStrings(m, path, []textField{{"service", &c.Service}, {"hostname", &c.Hostname}}); err != nil {
			return nil, err
		}
		if r, ok := m["extra-header"]; ok {
			if json.Unmarshal(r, &c.ExtraHeader) != nil || c.ExtraHeader == nil {
				return nil, fieldErr(path+".extra-header", "expected a mapping of header names to text, got %s", strictyaml.Describe(r))
			}
		}
		if r, ok := m["size"]; ok {
			if err := decodeSize(r, &c.Size); err != nil {
				return nil, fieldErr(path+".size", "%v", err)
			}
		}
		if r, ok := m["probability"]; ok {
			if err := strictyaml.WholeNumber(r, &c.Probability); err != nil {
				return nil, fieldErr(path+".probability", "%v", err)
			}
			if c.Probability < 0 || c.Probability > 100 {
				return nil, fieldErr(path+".probability", "%d is out of range: a percentage of requests, 1 to 100 (0 or unset: every request)", c.Probability)
			}
		}
	}
	if c.Service == "" {
		return nil, fieldErr(path, "names no service; set call: NAME or call: {service: NAME}")
	}
	if c.Hostname == "" {
		c.Hostname = fmt.Sprintf("%s:%d", c.Service, ServicePort)
	}
	return c, nil
}

// decodePercentage reads isotope's percentages: text ending in % ("0.01%")
// or a number from 0 to 1.
func decodePercentage(raw json.RawMessage, dst *float64) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
		f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if !ok || err != nil {
			return fmt.Errorf("%q is not a percentage (use a form like 0.01%% or a number from 0 to 1)", s)
		}
		if !(f >= 0 && f <= 100) {
			return fmt.Errorf("%s is out of range: 0%% to 100%%", s)
		}
		*dst = f / 100
		return nil
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || string(raw) == "null" {
		return fmt.Errorf("expected a percentage such as 0.01%% or a number from 0 to 1, got %s", strictyaml.Describe(raw))
	}
	if !(f >= 0 && f <= 1) {
		return fmt.Errorf("%v is out of range: a number is a fraction from 0 to 1 (write %v%% for a percentage)", f, f)
	}
	*dst = f
	return nil
}

// sizeRE is what isotope's sizes accept (docker/go-units' RAMInBytes): a
// number, one optional space, and an optional unit, case-insensitive: B, or
// K, M, G, T, P followed by nothing, B or iB; every unit is binary.
var sizeRE = regexp.MustCompile(`^(\d+(?:\.\d+)?) ?(?:([kKmMgGtTpP])(?:[bB]|[iI][bB])?|[bB])?$`)

var sizeUnits = map[byte]float64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30, 't': 1 << 40, 'p': 1 << 50}

// decodeSize reads a size: a whole number of bytes, or text such as
// "1 KB" or "16KiB" (1024 and 16384 bytes; fractions of a byte dropped,
// as isotope does).
func decodeSize(raw json.RawMessage, dst *int64) error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
		if m == nil {
			return fmt.Errorf("%q is not a size (use bytes, or a form like 128 B, 1 KB, 1KiB or 16 MB; units are binary)", s)
		}
		f, _ := strconv.ParseFloat(m[1], 64)
		if m[2] != "" {
			f *= sizeUnits[strings.ToLower(m[2])[0]]
		}
		if f >= math.MaxInt64 {
			return fmt.Errorf("%s is too large", s)
		}
		*dst = int64(f)
		return nil
	}
	var n int
	if err := strictyaml.WholeNumber(raw, &n); err != nil {
		return fmt.Errorf("expected a size such as 1 KB or a whole number of bytes, got %s", strictyaml.Describe(raw))
	}
	if n < 0 {
		return fmt.Errorf("%d is negative; a size is 0 bytes or more", n)
	}
	*dst = int64(n)
	return nil
}

// textField is a text field's key and where it goes.
type textField struct {
	key string
	dst *string
}

// decodeStrings reads text fields in the order given, so that of two bad
// fields the same one is always reported.
func decodeStrings(m map[string]json.RawMessage, path string, fields []textField) error {
	for _, f := range fields {
		if r, ok := m[f.key]; ok {
			if err := strictyaml.Text(r, f.dst); err != nil {
				return fieldErr(join(path, f.key), "%v", err)
			}
		}
	}
	return nil
}
