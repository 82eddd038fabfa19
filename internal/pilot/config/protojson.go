package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/meshperf/meshperf/internal/excerpt"
)

type protoMessage = proto.Message

// decodeProto decodes an Istio spec strictly. protojson reports unknown
// fields and bad values without saying where they are, so the JSON is first
// walked against the message descriptor to report the field path; protojson
// then does the actual decoding (and catches anything the walk let through).
//
// The walk also rewrites durations: Istio decodes its CRDs with the older
// jsonpb, which reads Duration with time.ParseDuration, so "5m" and "100ms"
// are valid Istio config (its own docs use them) although protojson wants
// seconds ("300s").
func decodeProto(js []byte, m proto.Message, prefix string) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return FieldError{Path: prefix, Problem: err.Error()}
	}
	w := walker{}
	if fe := w.message(v, m.ProtoReflect().Descriptor(), prefix, 0); fe != nil {
		return *fe
	}
	if w.rewrote {
		var err error
		if js, err = json.Marshal(v); err != nil {
			return FieldError{Path: prefix, Problem: err.Error()}
		}
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		return FieldError{Path: prefix, Problem: protojsonProblem(err)}
	}
	return nil
}

// protojsonProblem drops protojson's "proto: (line 1:23): " preamble, whose
// position refers to an intermediate JSON document the user never saw.
func protojsonProblem(err error) string {
	msg := strings.TrimPrefix(err.Error(), "proto:")
	msg = strings.TrimSpace(msg)
	if strings.HasPrefix(msg, "(line ") {
		if i := strings.Index(msg, "):"); i >= 0 {
			msg = strings.TrimSpace(msg[i+2:])
		}
	}
	return msg
}

// walker checks a decoded JSON value against a message descriptor, rewriting
// durations into protojson's form in place.
type walker struct {
	rewrote bool
}

// maxDepth bounds recursion on hostile input; protojson's own limit is 10000.
const maxDepth = 100

func (w *walker) message(v any, md protoreflect.MessageDescriptor, path string, depth int) *FieldError {
	if depth > maxDepth {
		return &FieldError{Path: path, Problem: "nested too deeply"}
	}
	if v == nil {
		return nil
	}
	if isWellKnown(md) {
		return nil // checked by the caller, which can replace the value
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a mapping"}
	}
	// Sorted so that the first error reported does not depend on map order.
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var oneofs map[protoreflect.FullName]string
	seen := make(map[protoreflect.FieldNumber]string, len(keys)) // protojson accepts both exportTo and export_to
	for _, k := range keys {
		fd := md.Fields().ByJSONName(k)
		if fd == nil {
			fd = md.Fields().ByTextName(k)
		}
		if fd == nil {
			return &FieldError{Path: joinPath(path, k), Problem: "unknown field"}
		}
		if prev, dup := seen[fd.Number()]; dup {
			return &FieldError{Path: joinPath(path, k), Problem: "duplicate of " + prev}
		}
		seen[fd.Number()] = k
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && obj[k] != nil {
			if other, dup := oneofs[od.FullName()]; dup {
				return &FieldError{Path: joinPath(path, k), Problem: fmt.Sprintf("cannot be set together with %s (only one of %s)", other, oneofNames(od))}
			}
			if oneofs == nil {
				oneofs = map[protoreflect.FullName]string{}
			}
			oneofs[od.FullName()] = k
		}
		if fe := w.field(obj, k, fd, joinPath(path, k), depth); fe != nil {
			return fe
		}
	}
	return nil
}

// field checks obj[name], the value of field fd.
func (w *walker) field(obj map[string]any, name string, fd protoreflect.FieldDescriptor, path string, depth int) *FieldError {
	v := obj[name]
	if v == nil {
		return nil
	}
	switch {
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a mapping"}
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			nv, fe := w.singular(obj[k], fd.MapValue(), key(path, k), depth)
			if fe != nil {
				return fe
			}
			obj[k] = nv
		}
		return nil
	case fd.IsList():
		list, ok := v.([]any)
		if !ok {
			return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a list"}
		}
		for i, item := range list {
			nv, fe := w.singular(item, fd, idx(path, i), depth)
			if fe != nil {
				return fe
			}
			list[i] = nv
		}
		return nil
	}
	nv, fe := w.singular(v, fd, path, depth)
	obj[name] = nv
	return fe
}

// singular checks one value of field fd and returns it, or its replacement.
func (w *walker) singular(v any, fd protoreflect.FieldDescriptor, path string, depth int) (any, *FieldError) {
	if v == nil {
		return nil, nil
	}
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if isWellKnown(fd.Message()) {
			return w.wellKnown(v, fd.Message(), path)
		}
		return v, w.message(v, fd.Message(), path, depth+1)
	}
	return v, checkScalar(v, fd, path)
}

func checkScalar(v any, fd protoreflect.FieldDescriptor, path string) *FieldError {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		return checkEnum(v, fd.Enum(), path)
	case protoreflect.BoolKind:
		if _, ok := v.(bool); !ok {
			return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a boolean"}
		}
	case protoreflect.StringKind, protoreflect.BytesKind:
		if _, ok := v.(string); !ok {
			return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a string"}
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return checkFloat(v, path)
	default:
		return checkInt(v, fd.Kind(), path)
	}
	return nil
}

func checkEnum(v any, ed protoreflect.EnumDescriptor, path string) *FieldError {
	switch t := v.(type) {
	case string:
		if ed.Values().ByName(protoreflect.Name(t)) != nil {
			return nil
		}
		names := make([]string, ed.Values().Len())
		for i := range names {
			names[i] = string(ed.Values().Get(i).Name())
		}
		return &FieldError{Path: path, Problem: fmt.Sprintf("unknown value %q; want one of %s", excerpt.Value(t), strings.Join(names, ", "))}
	case json.Number:
		if _, err := strconv.ParseInt(string(t), 10, 32); err != nil {
			return &FieldError{Path: path, Problem: "invalid enum number " + excerpt.String(string(t))}
		}
		return nil
	}
	return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a string"}
}

func checkFloat(v any, path string) *FieldError {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = string(t)
	case string:
		if t == "NaN" || t == "Infinity" || t == "-Infinity" {
			return nil
		}
		s = t
	default:
		return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a number"}
	}
	if f, err := strconv.ParseFloat(s, 64); err != nil || math.IsInf(f, 0) {
		return &FieldError{Path: path, Problem: fmt.Sprintf("invalid number %q", excerpt.Value(s))}
	}
	return nil
}

func checkInt(v any, kind protoreflect.Kind, path string) *FieldError {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = string(t)
	case string:
		s = t
	default:
		return &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want an integer"}
	}
	bits, unsigned := 64, false
	switch kind {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		bits = 32
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		bits, unsigned = 32, true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		unsigned = true
	}
	if !intFits(s, bits, unsigned) {
		want := "an integer"
		if unsigned {
			want = "a non-negative integer"
		}
		return &FieldError{Path: path, Problem: fmt.Sprintf("%s is not %s of %d bits", excerpt.Value(s), want, bits)}
	}
	return nil
}

// intFits accepts what protojson accepts for integers: decimal, possibly with
// an exponent or a fraction of zero, within range.
func intFits(s string, bits int, unsigned bool) bool {
	if unsigned {
		if _, err := strconv.ParseUint(s, 10, bits); err == nil {
			return true
		}
	} else if _, err := strconv.ParseInt(s, 10, bits); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) {
		return false
	}
	if unsigned {
		return f >= 0 && f <= math.Ldexp(1, bits)-1
	}
	return f >= -math.Ldexp(1, bits-1) && f <= math.Ldexp(1, bits-1)-1
}

func isWellKnown(md protoreflect.MessageDescriptor) bool {
	return md.ParentFile().Package() == "google.protobuf"
}

// wellKnown checks the JSON forms of the well-known types Istio's specs use:
// Duration and Timestamp as strings, wrappers as their scalar; Struct, Value,
// Any and the rest are left to protojson. Durations come back in protojson's
// form.
func (w *walker) wellKnown(v any, md protoreflect.MessageDescriptor, path string) (any, *FieldError) {
	switch md.Name() {
	case "Duration":
		s, ok := v.(string)
		if !ok {
			return v, &FieldError{Path: path, Problem: "got " + jsonType(v) + `, want a duration such as "1.5s" or "5m"`}
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return v, &FieldError{Path: path, Problem: fmt.Sprintf("invalid duration %q: want a number with a unit such as \"1.5s\" or \"5m\"", excerpt.Value(s))}
		}
		if canonical := protoDuration(d); canonical != s {
			w.rewrote = true
			return canonical, nil
		}
	case "Timestamp", "FieldMask":
		if _, ok := v.(string); !ok {
			return v, &FieldError{Path: path, Problem: "got " + jsonType(v) + ", want a string"}
		}
	case "BoolValue", "StringValue", "BytesValue", "Int32Value", "Int64Value",
		"UInt32Value", "UInt64Value", "FloatValue", "DoubleValue":
		return v, checkScalar(v, md.Fields().ByName("value"), path)
	}
	return v, nil
}

// protoDuration formats d in the form protojson reads: decimal seconds with
// an "s" suffix.
func protoDuration(d time.Duration) string {
	sign, u := "", uint64(d)
	if d < 0 {
		sign, u = "-", uint64(-(d+1))+1
	}
	frac := strings.TrimRight(fmt.Sprintf("%09d", u%1e9), "0")
	if frac != "" {
		frac = "." + frac
	}
	return sign + strconv.FormatUint(u/1e9, 10) + frac + "s"
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

func oneofNames(od protoreflect.OneofDescriptor) string {
	names := make([]string, od.Fields().Len())
	for i := range names {
		names[i] = od.Fields().Get(i).JSONName()
	}
	return strings.Join(names, ", ")
}
