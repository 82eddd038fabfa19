package results

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

type nanLeaf struct {
	Name  string  `json:"name"`
	V     float64 `json:"v"`
	Small float32 `json:"small,omitempty"`
}

type nanDoc struct {
	Top      float64            `json:"top"`
	Inf      float64            `json:"inf"`
	Leaves   []nanLeaf          `json:"leaves"`
	Nested   [][]float64        `json:"nested"`
	ByName   map[string]float64 `json:"by_name"`
	Ptr      *nanLeaf           `json:"ptr"`
	Gone     float64            `json:"-"`
	Empty    []nanLeaf          `json:"empty,omitempty"`
	Zero     float64            `json:"zero,omitempty"`
	NaNOmit  float64            `json:"nan_omit,omitempty"`
	Untagged float64
	When     time.Time     `json:"when"`
	Wait     time.Duration `json:"wait_ns"`
	hidden   float64
}

func TestNaNJSONRoundTrip(t *testing.T) {
	nan := math.NaN()
	in := nanDoc{
		Top: nan, Inf: math.Inf(1),
		Leaves:   []nanLeaf{{"a", 1.5, 2}, {"b", nan, 0}},
		Nested:   [][]float64{{1, nan}, {nan}},
		ByName:   map[string]float64{"x": nan, "y": 3},
		Ptr:      &nanLeaf{"p", nan, 0},
		Gone:     7,
		NaNOmit:  nan,
		Untagged: nan,
		When:     time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC),
		Wait:     5 * time.Millisecond,
		hidden:   9,
	}
	data, err := MarshalNaN(in)
	if err != nil {
		t.Fatal(err)
	}
	// The document: NaN and infinity as null, tag names, "-" and an empty
	// omitempty left out, a NaN omitempty kept (it is not empty).
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	for _, key := range []string{"top", "inf", "nan_omit", "Untagged"} {
		if v, ok := doc[key]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null in %s", key, v, ok, data)
		}
	}
	for _, key := range []string{"Gone", "-", "empty", "zero", "hidden", "small"} {
		if _, ok := doc[key]; ok {
			t.Errorf("%s written in %s", key, data)
		}
	}
	if !strings.Contains(string(data), `"when":"2026-11-27T01:02:03Z"`) || !strings.Contains(string(data), `"wait_ns":5000000`) {
		t.Errorf("time or duration not as encoding/json writes them: %s", data)
	}
	var out nanDoc
	if err := UnmarshalNaN(data, &out); err != nil {
		t.Fatal(err)
	}
	// Back: every NaN and the infinity are NaN, every other figure as it was.
	want := in
	want.Inf, want.Gone, want.hidden = nan, 0, 0
	if !sameNaN(out, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, want)
	}
	// A figure that really was 0 stays 0: only null is NaN.
	if out.Leaves[0].Small != 2 || out.Zero != 0 || math.IsNaN(out.Zero) {
		t.Errorf("zero and known figures changed: %+v", out)
	}
}

// sameNaN is reflect.DeepEqual with NaN equal to NaN (and to nothing else).
func sameNaN(a, b any) bool { return equalNaN(reflect.ValueOf(a), reflect.ValueOf(b)) }

func equalNaN(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || math.IsNaN(x) && math.IsNaN(y)
	case reflect.Pointer:
		return a.IsNil() == b.IsNil() && (a.IsNil() || equalNaN(a.Elem(), b.Elem()))
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() {
			return false
		}
		for i := range a.Len() {
			if !equalNaN(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for it := a.MapRange(); it.Next(); {
			if bv := b.MapIndex(it.Key()); !bv.IsValid() || !equalNaN(it.Value(), bv) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return a.Interface().(time.Time).Equal(b.Interface().(time.Time))
		}
		for i := range a.NumField() {
			if !equalNaN(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(valueOf(a), valueOf(b))
}

// valueOf is v's value, read even from an unexported field.
func valueOf(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint()
	case reflect.String:
		return v.String()
	}
	return v.Interface()
}

func TestNaNJSONRefusesTwoFieldsOfOneName(t *testing.T) {
	type twice struct {
		A float64
		B float64 `json:"A"`
	}
	if data, err := MarshalNaN(twice{1, 2}); err == nil || !strings.Contains(err.Error(), `"A"`) {
		t.Errorf("marshalled %s, %v; want an error naming the field", data, err)
	}
}

// An embedded struct's fields are inlined as encoding/json inlines them,
// and a field of the outer struct hides the embedded one of its name: the
// way a report adds figures to a type it embeds. A nil embedded pointer
// adds nothing.
func TestNaNJSONInlinesEmbeddedStructs(t *testing.T) {
	type inner struct {
		Value float64 `json:"value"`
		Note  string  `json:"note"`
		Shown float64 `json:"shown"`
	}
	type outer struct {
		inner
		*Machine
		Note string `json:"note"` // hides inner.Note
		Met  bool   `json:"met"`
	}
	data, err := MarshalNaN(outer{inner: inner{Value: math.NaN(), Note: "hidden", Shown: 2}, Note: "outer", Met: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"met":true,"note":"outer","shown":2,"value":null}`; string(data) != want {
		t.Errorf("marshalled %s, want %s", data, want)
	}
	var back outer
	if err := UnmarshalNaN(data, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(back.Value) || back.Shown != 2 || back.Note != "outer" || !back.Met {
		t.Errorf("read back %+v", back)
	}

	type one struct{ Value float64 }
	type other struct{ Value float64 }
	type sameLevel struct {
		one
		other
	}
	if data, err := MarshalNaN(sameLevel{}); err == nil || !strings.Contains(err.Error(), `"Value"`) {
		t.Errorf("two embedded structs with one field name: marshalled %s, %v; want an error naming it", data, err)
	}
}
