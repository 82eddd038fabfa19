package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// Encode returns the canonical JSON of r: apiVersion, kind, metadata and spec,
// in that order, with no insignificant whitespace. The same Resource always
// encodes to the same bytes, and Decode reads them back to an equal Resource,
// which is what the store relies on.
func Encode(r *Resource) ([]byte, error) {
	meta, err := json.Marshal(&r.Meta)
	if err != nil {
		return nil, fmt.Errorf("encoding %s metadata: %w", r.Key(), err)
	}
	spec, err := encodeSpec(r.Spec)
	if err != nil {
		return nil, fmt.Errorf("encoding %s spec: %w", r.Key(), err)
	}
	apiVersion, _ := json.Marshal(r.APIVersion)
	kind, _ := json.Marshal(r.Kind.ManifestKind())
	var b bytes.Buffer
	b.Grow(len(meta) + len(spec) + 64)
	b.WriteString(`{"apiVersion":`)
	b.Write(apiVersion)
	b.WriteString(`,"kind":`)
	b.Write(kind)
	b.WriteString(`,"metadata":`)
	b.Write(meta)
	b.WriteString(`,"spec":`)
	b.Write(spec)
	b.WriteString("}")
	return b.Bytes(), nil
}

func encodeSpec(spec any) ([]byte, error) {
	switch s := spec.(type) {
	case nil:
		return []byte("{}"), nil
	case proto.Message:
		js, err := protojson.Marshal(s)
		if err != nil {
			return nil, err
		}
		// protojson deliberately varies its whitespace between builds;
		// compacting makes the bytes stable.
		var b bytes.Buffer
		if err := json.Compact(&b, js); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	default:
		return json.Marshal(s)
	}
}

// EncodeYAML returns r as YAML (keys sorted, which puts apiVersion, kind,
// metadata and spec in their usual order), for `meshperf get -o yaml`.
func EncodeYAML(r *Resource) ([]byte, error) {
	js, err := Encode(r)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(js)
}

// Equal says whether two resources hold the same object: same kind,
// apiVersion, metadata (timestamps compared as instants) and spec.
func Equal(a, b *Resource) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || a.APIVersion != b.APIVersion || !equality.Semantic.DeepEqual(a.Meta, b.Meta) {
		return false
	}
	am, aok := a.Spec.(proto.Message)
	bm, bok := b.Spec.(proto.Message)
	if aok || bok {
		return aok && bok && proto.Equal(am, bm)
	}
	return equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
