package results

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
)

// JSON has no NaN, and the figures the store keeps as documents (a
// sweep's capacity.Analysis) use NaN for "unknown" in plain float64
// fields, whose types belong to other packages. MarshalNaN and
// UnmarshalNaN (also for the dashboard's API, which answers the same
// documents) carry such a value through JSON by its own json tags, an
// unknown figure as null: encoding/json alone would refuse the NaN on the
// way out and read null back as 0, a figure that was never measured.

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

// MarshalNaN is json.Marshal with every NaN or infinite float written as
// null. It honours json tag names, omitempty and "-"; a struct with two
// fields under one name is an error, where encoding/json drops both.
func MarshalNaN(v any) ([]byte, error) {
	tree, err := nanTree(reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	return json.Marshal(tree)
}

// nanTree is v as the values json.Marshal writes, NaN as nil.
func nanTree(v reflect.Value) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	if v.Type().Implements(jsonMarshaler) && (v.Kind() != reflect.Pointer || !v.IsNil()) {
		return v.Interface(), nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return nanTree(v.Elem())
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, nil
		}
		return v.Interface(), nil
	case reflect.Struct:
		fields, err := fieldsOf(v)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, f := range fields {
			if f.omitEmpty && emptyJSON(f.value) {
				continue
			}
			if out[f.name], err = nanTree(f.value); err != nil {
				return nil, err
			}
		}
		return out, nil
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		out := make([]any, v.Len())
		for i := range out {
			var err error
			if out[i], err = nanTree(v.Index(i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if v.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: only string map keys are written", v.Type())
		}
		out := map[string]any{}
		for it := v.MapRange(); it.Next(); {
			var err error
			if out[it.Key().String()], err = nanTree(it.Value()); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v.Interface(), nil
}

// emptyJSON says whether omitempty leaves v out, as encoding/json decides.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero() || (v.CanFloat() && v.Float() == 0)
	}
	return false
}

// UnmarshalNaN is json.Unmarshal into v (a pointer), then every float
// field whose JSON value was null set to NaN.
func UnmarshalNaN(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return err
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	nullsToNaN(reflect.ValueOf(v).Elem(), raw)
	return nil
}

// nullsToNaN walks v and its JSON (as json.Unmarshal decodes into any)
// together, setting each float whose JSON was null to NaN.
func nullsToNaN(v reflect.Value, raw any) {
	if v.CanAddr() && v.Addr().Type().Implements(jsonUnmarshaler) {
		return // it read its own JSON
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if raw == nil {
			v.SetFloat(math.NaN())
		}
	case reflect.Pointer:
		if !v.IsNil() {
			nullsToNaN(v.Elem(), raw)
		}
	case reflect.Struct:
		m, _ := raw.(map[string]any)
		fields, _ := fieldsOf(v) // two fields of one name: json.Unmarshal set neither
		for _, f := range fields {
			if r, found := m[f.name]; found {
				nullsToNaN(f.value, r)
			}
		}
	case reflect.Slice, reflect.Array:
		a, _ := raw.([]any)
		for i := range min(v.Len(), len(a)) {
			nullsToNaN(v.Index(i), a[i])
		}
	case reflect.Map:
		m, _ := raw.(map[string]any)
		for it := v.MapRange(); it.Next(); {
			// A map's values cannot be set in place: fix a copy and put it back.
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(it.Value())
			nullsToNaN(elem, m[it.Key().String()])
			v.SetMapIndex(it.Key(), elem)
		}
	}
}

// jsonValue is one field of a struct as JSON has it.
type jsonValue struct {
	name      string
	omitEmpty bool
	value     reflect.Value
}

// fieldsOf is struct v's fields as encoding/json writes them: the fields
// of an embedded struct without a JSON name are inlined (a report type
// that embeds another to add a few fields), and a field of v itself hides
// an inlined one of the same name. Two fields of one name at the same
// level are an error, where encoding/json silently drops both.
func fieldsOf(v reflect.Value) ([]jsonValue, error) {
	var direct, inlined []jsonValue
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if inner, embedded := embeddedStruct(f, v.Field(i)); embedded {
			if !inner.IsValid() {
				continue // a nil embedded pointer has no fields to write
			}
			fields, err := fieldsOf(inner)
			if err != nil {
				return nil, err
			}
			inlined = append(inlined, fields...)
			continue
		}
		if name, omitEmpty, ok := jsonField(f); ok {
			direct = append(direct, jsonValue{name: name, omitEmpty: omitEmpty, value: v.Field(i)})
		}
	}
	seen := map[string]bool{}
	for _, f := range direct {
		if seen[f.name] {
			return nil, fmt.Errorf("%s has two fields named %q in JSON", v.Type(), f.name)
		}
		seen[f.name] = true
	}
	out, hidden := direct, seen
	seen = map[string]bool{}
	for _, f := range inlined {
		if hidden[f.name] {
			continue
		}
		if seen[f.name] {
			return nil, fmt.Errorf("%s has two fields named %q in JSON", v.Type(), f.name)
		}
		seen[f.name] = true
		out = append(out, f)
	}
	return out, nil
}

// embeddedStruct says whether f is an embedded struct (or pointer to one)
// that JSON inlines, and gives its value: invalid for a nil pointer.
func embeddedStruct(f reflect.StructField, v reflect.Value) (reflect.Value, bool) {
	if !f.Anonymous {
		return reflect.Value{}, false
	}
	if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
		return reflect.Value{}, false // named: an ordinary field
	}
	t := f.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		return reflect.Value{}, false
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}, true
		}
		v = v.Elem()
	}
	return v, true
}

// jsonField is the name a struct field has in JSON, whether it is
// omitempty, and false for a field JSON leaves out (unexported, "-").
func jsonField(f reflect.StructField) (name string, omitEmpty, ok bool) {
	if !f.IsExported() {
		return "", false, false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false, false
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, strings.Contains(","+opts+",", ",omitempty,"), true
}
