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
		out := map[string]any{}
		for i := range v.NumField() {
			name, omitEmpty, ok := jsonField(v.Type().Field(i))
			if !ok || omitEmpty && emptyJSON(v.Field(i)) {
				continue
			}
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("%s has two fields named %q in JSON", v.Type(), name)
			}
			var err error
			if out[name], err = nanTree(v.Field(i)); err != nil {
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
		for i := range v.NumField() {
			if name, _, ok := jsonField(v.Type().Field(i)); ok {
				if r, found := m[name]; found {
					nullsToNaN(v.Field(i), r)
				}
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
