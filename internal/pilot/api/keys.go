package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/meshperf/meshperf/internal/excerpt"
	"github.com/meshperf/meshperf/internal/pilot/config"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// identity is the part of an object a delete needs.
type identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// DecodeKeys reads the identities of the objects in a multi-document YAML or
// JSON stream, for a delete. Only kind, metadata.name and metadata.namespace
// are read: as with `kubectl delete -f`, a file that no longer validates, or
// a stub without a spec, still names what to delete. The namespace defaults
// to "default" and is dropped for cluster-scoped kinds, as config.Decode
// does, and `kind: List` documents are expanded. Errors are one-line
// *config.DocumentError values naming filename and the document (counted from
// 1, empty documents not counted); nothing is returned with an error.
func DecodeKeys(filename string, data []byte) ([]config.Key, error) {
	var keys []config.Key
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, &config.DocumentError{File: filename, Document: n + 1, Item: -1, Err: err}
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, &config.DocumentError{File: filename, Document: n + 1, Item: -1, Err: fmt.Errorf("invalid YAML: %s", oneLine(err))}
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		n++
		ks, err := documentKeys(js, filename, n, -1)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
}

func documentKeys(js []byte, file string, doc, item int) ([]config.Key, error) {
	fail := func(k config.Key, err error) error {
		return &config.DocumentError{File: file, Document: doc, Item: item, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Err: err}
	}
	var id identity
	if err := json.Unmarshal(js, &id); err != nil {
		return nil, fail(config.Key{}, errors.New("not an object: want a mapping with kind and metadata"))
	}
	if id.Kind == "List" && item < 0 {
		var keys []config.Key
		for i, it := range id.Items {
			ks, err := documentKeys(it, file, doc, i)
			if err != nil {
				return nil, err
			}
			keys = append(keys, ks...)
		}
		return keys, nil
	}
	kind, err := exactKind(id.APIVersion, id.Kind)
	if err != nil {
		return nil, fail(config.Key{}, err)
	}
	k := config.Key{Kind: kind, Namespace: id.Metadata.Namespace, Name: id.Metadata.Name}
	if kind.ClusterScoped() {
		k.Namespace = ""
	} else if k.Namespace == "" {
		k.Namespace = "default"
	}
	if k.Name == "" {
		return nil, fail(k, config.FieldError{Path: "metadata.name", Problem: "required"})
	}
	return []config.Key{k}, nil
}

// exactKind accepts a kind as manifests spell it, told apart by its
// apiVersion where two groups share the name, like config.Decode.
func exactKind(apiVersion, s string) (config.Kind, error) {
	kind := config.KindOf(apiVersion, s)
	for _, k := range config.Kinds {
		if k == kind {
			return k, nil
		}
	}
	if s == "" {
		return "", config.FieldError{Path: "kind", Problem: "required"}
	}
	return "", fmt.Errorf("kind %q is not supported; supported kinds: %s", excerpt.Value(s), kindNames())
}

func oneLine(err error) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	return strings.Join(strings.Fields(msg), " ")
}
