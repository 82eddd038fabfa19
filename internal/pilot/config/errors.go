package config

import (
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/excerpt"
)

// FieldError is one problem with one field of an object, e.g.
// "spec.http[0].route[0].destination.host: required".
type FieldError struct {
	Path    string // dotted path from the object's root, with [i] for list items
	Problem string
}

// Error returns "path: problem". A path is built from the object's keys,
// which the client chose, so only a prefix of a long one is quoted.
func (e FieldError) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return excerpt.String(e.Path) + ": " + e.Problem
}

// ValidationError lists every field problem found in one object. Its message is
// a single line (problems joined with "; ") because it reaches users as one
// line of a CLI error or a log record.
type ValidationError struct {
	Fields []FieldError
}

// maxProblemsShown bounds the problems one message lists: an object with a
// hundred thousand bad hosts is one message of a few lines, not megabytes.
const maxProblemsShown = 20

// Error returns the problems on one line, the first maxProblemsShown of
// them and how many more there are.
func (e *ValidationError) Error() string {
	shown := e.Fields[:min(len(e.Fields), maxProblemsShown)]
	parts := make([]string, len(shown), len(shown)+1)
	for i, f := range shown {
		parts[i] = f.Error()
	}
	if more := len(e.Fields) - len(shown); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more problems", more))
	}
	return strings.Join(parts, "; ")
}

// DocumentError locates an error in a YAML stream: the file, the document
// (counting from 1), the list item for `kind: List` documents, and the object's
// identity when it is known.
type DocumentError struct {
	File      string
	Document  int
	Item      int // index in a List's items, or -1
	Kind      Kind
	Namespace string
	Name      string
	Err       error
}

// Error returns "FILE: document N (Kind namespace/name): problem". The file
// and the identity come from the client: a prefix of each is quoted.
func (e *DocumentError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(excerpt.String(e.File))
		b.WriteString(": ")
	}
	b.WriteString("document ")
	b.WriteString(strconv.Itoa(e.Document))
	if e.Item >= 0 {
		b.WriteString(" items[")
		b.WriteString(strconv.Itoa(e.Item))
		b.WriteString("]")
	}
	if e.Kind != "" {
		b.WriteString(" (")
		b.WriteString(string(e.Kind))
		if e.Name != "" {
			b.WriteString(" ")
			if e.Namespace != "" {
				b.WriteString(excerpt.String(e.Namespace))
				b.WriteString("/")
			}
			b.WriteString(excerpt.String(e.Name))
		}
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying *ValidationError, FieldError or parse error.
func (e *DocumentError) Unwrap() error { return e.Err }

// fieldErrors collects field problems while walking an object; nil-safe
// helpers keep the validators short.
type fieldErrors []FieldError

// add records a problem. Its string arguments are the object's values,
// which the client chose: each is quoted as a prefix (excerpt.Value), so
// a message does not grow with them.
func (fe *fieldErrors) add(path, format string, args ...any) {
	for i, a := range args {
		args[i] = clipString(a)
	}
	*fe = append(*fe, FieldError{Path: path, Problem: fmt.Sprintf(format, args...)})
}

// clipString is a, or, when a is a string of any type (corev1.Protocol
// too) that does not format itself, its excerpt.Value.
func clipString(a any) any {
	switch a.(type) {
	case fmt.Stringer, error:
		return a
	}
	if v := reflect.ValueOf(a); v.Kind() == reflect.String {
		return excerpt.Value(v.String())
	}
	return a
}

func (fe fieldErrors) err() error {
	if len(fe) == 0 {
		return nil
	}
	return &ValidationError{Fields: fe}
}

// idx and key build paths: idx("spec.http", 0) is "spec.http[0]".
func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
func key(path, k string) string     { return path + "[" + k + "]" }

// sortedMap iterates a map in key order so that errors come out in a stable
// order.
func sortedMap[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}
