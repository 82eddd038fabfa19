// Package strictyaml is how meshperf reads its own YAML input files
// (topologies and lab scenarios): YAML turned into JSON with
// duplicate keys refused, then decoded field by field, so that every
// problem reaches the user as one line naming the field's path, an
// unknown key comes with the known key it probably meant, and a value of
// the wrong kind is described as the user wrote it.
package strictyaml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// FieldError is a problem with one field; Field is its path in the file, as
// "services[3] (svc-0-2).errorRate".
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Errorf returns the FieldError of field with a formatted problem.
func Errorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// ToJSON converts a YAML document to JSON, trimmed. It refuses duplicate
// keys, where plain YAML lets the last one win without a word; its error
// is one line starting "not valid YAML: ". An empty document gives an
// empty result or "null", for the caller to say what the file needs.
func ToJSON(data []byte) ([]byte, error) {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		return nil, errors.New("not valid YAML: " + spaceRE.ReplaceAllString(strings.TrimSpace(msg), " "))
	}
	return bytes.TrimSpace(js), nil
}

var spaceRE = regexp.MustCompile(`\s+`)

// Describe names a JSON value's kind for an error, with the value when
// short: "text \"yes\"", "a number 1.5", "a list", "nothing (null)".
func Describe(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	kind := "a number"
	switch {
	case t == "null":
		return "nothing (null)"
	case strings.HasPrefix(t, "["):
		return "a list"
	case strings.HasPrefix(t, "{"):
		return "a mapping"
	case strings.HasPrefix(t, "\""):
		kind = "text"
	case t == "true" || t == "false":
		kind = "a boolean"
	}
	if len(t) > 40 {
		return kind
	}
	return kind + " " + t
}

// WholeNumber decodes a whole number (YAML's 2, 2.0 or 1e3), refusing
// fractions, text and numbers beyond float64's exact integers.
func WholeNumber(raw json.RawMessage, dst *int) error {
	var f float64
	if json.Unmarshal(raw, &f) != nil || string(raw) == "null" || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return fmt.Errorf("expected a whole number, got %s", Describe(raw))
	}
	*dst = int(f)
	return nil
}

// Text decodes text, refusing anything else, null (a key left empty)
// included.
func Text(raw json.RawMessage, dst *string) error {
	if json.Unmarshal(raw, dst) != nil || string(raw) == "null" {
		return fmt.Errorf("expected text, got %s", Describe(raw))
	}
	return nil
}

// Bool decodes true or false, refusing anything else, null (a key left
// empty) included: an empty key must not quietly keep a default.
func Bool(raw json.RawMessage, dst *bool) error {
	if json.Unmarshal(raw, dst) != nil || string(raw) == "null" {
		return fmt.Errorf("expected true or false, got %s", Describe(raw))
	}
	return nil
}

// UnknownField is the error for a key that is not one of known, at path
// (the key's full path, "services[0] (a).errorrate"): with the key it
// probably meant, or the list of the known ones when none is close.
// accepted are keys that are valid but mean nothing (a format's ignored
// keys): suggested when close, not listed.
func UnknownField(path, key string, known []string, accepted ...string) *FieldError {
	if guess := ClosestKey(key, append(append([]string{}, known...), accepted...)); guess != "" {
		return Errorf(path, "unknown field (did you mean %s?)", guess)
	}
	return Errorf(path, "unknown field (known: %s)", strings.Join(known, ", "))
}

// ClosestKey suggests the key k was probably meant to be: one that differs
// only in case, '_' or '-', or by at most two edits (conections,
// payload_size); "" when none is that close.
func ClosestKey(k string, keys []string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	best, bestDist := "", 3
	for _, key := range keys {
		if norm(key) == norm(k) {
			return key
		}
		if d := editDistance(norm(key), norm(k)); d < bestDist {
			best, bestDist = key, d
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
