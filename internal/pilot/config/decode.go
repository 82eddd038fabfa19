package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/meshperf/meshperf/internal/excerpt"
)

// kindInfo says which apiVersions a kind is accepted under and which Go type
// its spec decodes into.
type kindInfo struct {
	versions []string
	newSpec  func() any
}

var (
	coreVersions       = []string{"v1"}
	networkingVersions = []string{"networking.istio.io/v1", "networking.istio.io/v1beta1", "networking.istio.io/v1alpha3"}
	securityVersions   = []string{"security.istio.io/v1", "security.istio.io/v1beta1"}
	gatewayAPIVersions = []string{GatewayAPIGroup + "/v1", GatewayAPIGroup + "/v1beta1"}
)

var kindInfos = map[Kind]kindInfo{
	KindNamespace:          {coreVersions, func() any { return &corev1.NamespaceSpec{} }},
	KindService:            {coreVersions, func() any { return &corev1.ServiceSpec{} }},
	KindServiceEntry:       {networkingVersions, func() any { return &networking.ServiceEntry{} }},
	KindWorkloadEntry:      {networkingVersions, func() any { return &networking.WorkloadEntry{} }},
	KindVirtualService:     {networkingVersions, func() any { return &networking.VirtualService{} }},
	KindDestinationRule:    {networkingVersions, func() any { return &networking.DestinationRule{} }},
	KindGateway:            {networkingVersions, func() any { return &networking.Gateway{} }},
	KindSidecar:            {networkingVersions, func() any { return &networking.Sidecar{} }},
	KindPeerAuthentication: {securityVersions, func() any { return &security.PeerAuthentication{} }},

	KindAuthorizationPolicy: {securityVersions, func() any { return &security.AuthorizationPolicy{} }},
	KindKubernetesGateway:   {gatewayAPIVersions, func() any { return &gatewayv1.GatewaySpec{} }},
}

// rawDocument is the envelope of one object. Status is accepted and dropped so
// that the output of `kubectl get -o yaml` can be fed back in; Items is only
// meaningful for `kind: List`.
type rawDocument struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   json.RawMessage   `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Status     json.RawMessage   `json:"status"`
	Items      []json.RawMessage `json:"items"`
}

// Decode reads a multi-document YAML (or JSON) stream and returns one Resource
// per object, each validated. Empty documents are skipped and `kind: List`
// documents are expanded into their items. The first problem found is
// returned as a one-line *DocumentError naming filename and the document
// (counted from 1, empty documents not counted); nothing is returned with it,
// so a bad file never half-applies.
func Decode(filename string, data []byte) ([]*Resource, error) {
	var out []*Resource
	n := 0
	for _, chunk := range splitDocuments(data) {
		js, err := yaml.YAMLToJSONStrict(chunk.text)
		if err != nil {
			n++
			return nil, &DocumentError{File: filename, Document: n, Item: -1, Err: yamlError(err, chunk.line)}
		}
		if isNull(js) {
			continue
		}
		n++
		rs, err := decodeDocument(js, docRef{file: filename, doc: n, item: -1}, true)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

type docRef struct {
	file string
	doc  int
	item int
}

func (d docRef) err(r *Resource, err error) error {
	de := &DocumentError{File: d.file, Document: d.doc, Item: d.item, Err: err}
	if r != nil {
		de.Kind, de.Namespace, de.Name = r.Kind, r.Meta.Namespace, r.Meta.Name
	}
	return de
}

// decodeDocument decodes one JSON object, expanding a List when allowed.
func decodeDocument(js []byte, ref docRef, allowList bool) ([]*Resource, error) {
	if t := firstByte(js); t != '{' {
		return nil, ref.err(nil, errors.New("not an object: want a mapping with apiVersion, kind, metadata and spec"))
	}
	var doc rawDocument
	strict, err := sjson.UnmarshalStrict(js, &doc)
	if err != nil {
		return nil, ref.err(nil, jsonError("", err))
	}
	if doc.Kind == "List" && allowList {
		if len(strict) > 0 {
			return nil, ref.err(nil, strictError("", strict))
		}
		var out []*Resource
		for i, item := range doc.Items {
			rs, err := decodeDocument(item, docRef{file: ref.file, doc: ref.doc, item: i}, false)
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
		}
		return out, nil
	}
	r, err := decodeObject(&doc, strict)
	if err != nil {
		return nil, ref.err(r, err)
	}
	return []*Resource{r}, nil
}

// decodeObject turns an envelope into a Resource. On error it still returns
// the partially decoded Resource when its identity is known, for the message.
func decodeObject(doc *rawDocument, strict []error) (*Resource, error) {
	kind := KindOf(doc.APIVersion, doc.Kind)
	info, ok := kindInfos[kind]
	if !ok {
		return nil, fmt.Errorf("kind %q (apiVersion %q) is not supported; supported kinds: %s", excerpt.Value(doc.Kind), excerpt.Value(doc.APIVersion), kindList())
	}
	if !slices.Contains(info.versions, doc.APIVersion) {
		return &Resource{Kind: kind}, fmt.Errorf("apiVersion %q is not supported for %s; use %s", excerpt.Value(doc.APIVersion), kind, strings.Join(info.versions, ", "))
	}
	r := &Resource{Kind: kind, APIVersion: doc.APIVersion}
	if !isNull(doc.Metadata) {
		strictMeta, err := sjson.UnmarshalStrict(doc.Metadata, &r.Meta)
		if err != nil {
			return r, jsonError("metadata", err)
		}
		if len(strictMeta) > 0 {
			return r, strictError("metadata", strictMeta)
		}
	}
	normalizeMeta(r)
	if len(strict) > 0 {
		return r, strictError("", strict)
	}
	spec, err := decodeSpec(info, doc.Spec)
	if err != nil {
		return r, err
	}
	r.Spec = spec
	if err := Validate(r); err != nil {
		return r, err
	}
	return r, nil
}

// normalizeMeta applies what the API server would: namespaced objects default
// to "default" (as kubectl apply does), cluster-scoped ones have no namespace,
// and timestamps keep whole seconds (their JSON form) so that decoding is a
// fixed point of Encode.
func normalizeMeta(r *Resource) {
	if r.Kind.ClusterScoped() {
		r.Meta.Namespace = ""
	} else if r.Meta.Namespace == "" {
		r.Meta.Namespace = "default"
	}
	r.Meta.CreationTimestamp = truncateTime(r.Meta.CreationTimestamp)
	if r.Meta.DeletionTimestamp != nil {
		t := truncateTime(*r.Meta.DeletionTimestamp)
		r.Meta.DeletionTimestamp = &t
	}
}

func truncateTime(t metav1.Time) metav1.Time {
	if t.IsZero() {
		return t
	}
	return metav1.NewTime(t.Truncate(1e9).Local())
}

func decodeSpec(info kindInfo, js json.RawMessage) (any, error) {
	spec := info.newSpec()
	if isNull(js) {
		return spec, nil
	}
	if m, ok := spec.(protoMessage); ok {
		return spec, decodeProto(js, m, "spec")
	}
	strict, err := sjson.UnmarshalStrict(js, spec)
	if err != nil {
		return spec, jsonError("spec", err)
	}
	if len(strict) > 0 {
		return spec, strictError("spec", strict)
	}
	return spec, nil
}

// jsonError turns an error of the Kubernetes JSON decoder into a FieldError
// with a path and a short problem, since its own message names Go types.
func jsonError(prefix string, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return FieldError{Path: joinPath(prefix, te.Field), Problem: fmt.Sprintf("got %s, want %s", te.Value, describeType(te.Type))}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return FieldError{Path: prefix, Problem: msg}
}

// strictError reports the first unknown or duplicate field.
func strictError(prefix string, strict []error) error {
	for _, e := range strict {
		var fe sjson.FieldError
		if errors.As(e, &fe) {
			problem := "unknown field"
			if strings.HasPrefix(e.Error(), "duplicate") {
				problem = "duplicate field"
			}
			return FieldError{Path: joinPath(prefix, fe.FieldPath()), Problem: problem}
		}
	}
	return FieldError{Path: prefix, Problem: strict[0].Error()}
}

func describeType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

func joinPath(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// yamlError makes a YAML parser error one line and its line numbers relative
// to the whole file rather than to the document.
func yamlError(err error, firstLine int) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:")
	msg = yamlLine.ReplaceAllStringFunc(msg, func(s string) string {
		n, convErr := strconv.Atoi(s[len("line "):])
		if convErr != nil {
			return s
		}
		return "line " + strconv.Itoa(n+firstLine-1)
	})
	msg = strings.Join(strings.Fields(msg), " ")
	return errors.New("invalid YAML: " + msg)
}

type chunk struct {
	text []byte
	line int // 1-based line of the chunk's first line in the file
}

// splitDocuments cuts a stream at "---" lines, as Kubernetes' YAML reader
// does: a separator is a line starting with "---" followed only by blanks or
// a comment.
func splitDocuments(data []byte) []chunk {
	var out []chunk
	start, startLine, line := 0, 1, 1
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		if isSeparator(data[pos:next]) {
			out = append(out, chunk{text: data[start:pos], line: startLine})
			start, startLine = next, line+1
		}
		pos = next
		line++
	}
	return append(out, chunk{text: data[start:], line: startLine})
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

func isNull(js []byte) bool {
	t := bytes.TrimSpace(js)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func firstByte(js []byte) byte {
	t := bytes.TrimSpace(js)
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
