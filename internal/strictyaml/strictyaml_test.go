package strictyaml

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestToJSON(t *testing.T) {
	js, err := ToJSON([]byte("a: 1\nb: [x, 2]\n"))
	if err != nil || string(js) != `{"a":1,"b":["x",2]}` {
		t.Errorf("ToJSON = %s, %v", js, err)
	}
	for _, bad := range []string{"a: 1\na: 2\n", "a: [1\n  b: 2\n"} {
		_, err := ToJSON([]byte(bad))
		if err == nil || !strings.HasPrefix(err.Error(), "not valid YAML: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ToJSON(%q) = %v, want one line starting 'not valid YAML: '", bad, err)
		}
	}
}

func TestWholeNumber(t *testing.T) {
	for in, want := range map[string]int{"2": 2, "2.0": 2, "1e3": 1000, "-4": -4} {
		var got int
		if err := WholeNumber(json.RawMessage(in), &got); err != nil || got != want {
			t.Errorf("WholeNumber(%s) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"1.5", `"2"`, "null", "1e300", "[]", "true"} {
		var got int
		if err := WholeNumber(json.RawMessage(in), &got); err == nil {
			t.Errorf("WholeNumber(%s) accepted as %d", in, got)
		}
	}
}

func TestTextAndBool(t *testing.T) {
	var text string
	if err := Text(json.RawMessage(`"a b"`), &text); err != nil || text != "a b" {
		t.Errorf("Text(\"a b\") = %q, %v", text, err)
	}
	var b bool
	if err := Bool(json.RawMessage(`true`), &b); err != nil || !b {
		t.Errorf("Bool(true) = %v, %v", b, err)
	}
	for in, want := range map[string]string{
		"null": "expected text, got nothing (null)", "1": "expected text, got a number 1", "[]": "expected text, got a list",
	} {
		if err := Text(json.RawMessage(in), &text); err == nil || err.Error() != want {
			t.Errorf("Text(%s) = %v, want %q", in, err, want)
		}
	}
	for in, want := range map[string]string{
		"null": "expected true or false, got nothing (null)", `"yes"`: `expected true or false, got text "yes"`, "1": "expected true or false, got a number 1",
	} {
		if err := Bool(json.RawMessage(in), &b); err == nil || err.Error() != want {
			t.Errorf("Bool(%s) = %v, want %q", in, err, want)
		}
	}
}

func TestDescribe(t *testing.T) {
	for in, want := range map[string]string{
		`null`: "nothing (null)", `[1]`: "a list", `{"a":1}`: "a mapping", `"yes"`: `text "yes"`,
		`true`: "a boolean true", `1.5`: "a number 1.5", `"` + strings.Repeat("x", 50) + `"`: "text",
	} {
		if got := Describe(json.RawMessage(in)); got != want {
			t.Errorf("Describe(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestUnknownField(t *testing.T) {
	known := []string{"services", "defaults", "errorRate", "payloadSize"}
	for key, want := range map[string]string{
		"default":      "x.default: unknown field (did you mean defaults?)",
		"errorrate":    "x.errorrate: unknown field (did you mean errorRate?)",
		"payload_size": "x.payload_size: unknown field (did you mean payloadSize?)",
		"frobnicate":   "x.frobnicate: unknown field (known: services, defaults, errorRate, payloadSize)",
		"memoryusage":  "x.memoryusage: unknown field (did you mean memoryUsage?)",
	} {
		if got := UnknownField("x."+key, key, known, "memoryUsage").Error(); got != want {
			t.Errorf("UnknownField(%s) = %q, want %q", key, got, want)
		}
	}
}
