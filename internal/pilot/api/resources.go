package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/excerpt"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/store"
)

// ApplyResponse answers POST /api/v1/apply.
type ApplyResponse struct {
	// Revision is the store's revision after the write (unchanged when
	// nothing changed).
	Revision int64 `json:"revision"`
	// Applied lists every object of the request as config.Key strings
	// ("Kind/namespace/name"), in request order.
	Applied []string `json:"applied"`
	// Objects says, in the same order, what happened to each object.
	Objects []ObjectResult `json:"objects"`
}

// DeleteResponse answers POST /api/v1/delete.
type DeleteResponse struct {
	Revision int64          `json:"revision"`
	Deleted  []string       `json:"deleted"`
	Objects  []ObjectResult `json:"objects"`
}

// ObjectResult is what one write did to one object.
type ObjectResult struct {
	Kind      config.Kind `json:"kind"`
	Namespace string      `json:"namespace,omitempty"`
	Name      string      `json:"name"`
	// Action is "created", "configured", "unchanged" or "deleted", the words
	// kubectl prints.
	Action string `json:"action"`
}

// ListResponse answers GET /api/v1/resources/{kind}. Items are objects in the
// form of config.Encode.
type ListResponse struct {
	Revision int64             `json:"revision"`
	Items    []json.RawMessage `json:"items"`
}

// ParseKind resolves a kind as users type it: the kind name in any case
// ("VirtualService", "virtualservice") or its lowercase plural
// ("virtualservices", "serviceentries"), either qualified by its group as
// kubectl takes it ("gateways.gateway.networking.k8s.io"). A bare "gateway"
// is Istio's; the Gateway API's needs its group. An unknown name is an error
// listing the supported kinds.
func ParseKind(s string) (config.Kind, error) {
	l := strings.ToLower(s)
	if k, ok := shortNames[l]; ok {
		return k, nil
	}
	for _, k := range config.Kinds {
		name := strings.ToLower(k.ManifestKind())
		for _, form := range []string{name, plural(k)} {
			if g := k.Group(); g != "" {
				if l == form+"."+g {
					return k, nil
				}
				if k == config.KindKubernetesGateway {
					continue // shares its bare name with Istio's Gateway
				}
			}
			if l == form {
				return k, nil
			}
		}
	}
	return "", fmt.Errorf("unknown kind %q; supported kinds: %s", excerpt.Value(s), kindNames())
}

// shortNames are the short names kubectl accepts for these kinds (the CRDs'
// shortNames for Istio's).
var shortNames = map[string]config.Kind{
	"ns": config.KindNamespace, "svc": config.KindService, "se": config.KindServiceEntry,
	"we": config.KindWorkloadEntry, "vs": config.KindVirtualService, "dr": config.KindDestinationRule,
	"gw": config.KindGateway, "pa": config.KindPeerAuthentication,
}

// kindNames lists the supported kinds for error messages.
func kindNames() string {
	names := make([]string, len(config.Kinds))
	for i, k := range config.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// plural is a kind's resource name, as kubectl and the Kubernetes API spell it
// (without the group).
func plural(k config.Kind) string {
	l := strings.ToLower(k.ManifestKind())
	if strings.HasSuffix(l, "y") && !strings.HasSuffix(l, "ay") { // entries, policies; gateways
		return l[:len(l)-1] + "ies"
	}
	return l + "s"
}

// readBody reads the request body (limitBodies caps it at MaxBodyBytes),
// answering 413 or 400 itself when it cannot.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, bodyTooLarge)
			return nil, false
		}
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
		return nil, false
	}
	return body, true
}

func sourceName(r *http.Request) string {
	if f := r.URL.Query().Get("file"); f != "" {
		return f
	}
	return "request"
}

// writer returns where writes go, or answers 409 when there is nowhere.
func (h *handler) writer(w http.ResponseWriter) (store.Writer, bool) {
	if h.d.Writer == nil {
		dir := h.d.ConfigDir
		if dir == "" {
			dir = "(a directory)"
		}
		writeError(w, http.StatusConflict, (&store.ReadOnlyError{Dir: dir}).Error())
		return nil, false
	}
	return h.d.Writer, true
}

// writeStoreError maps a write's error to its status.
func (h *handler) writeStoreError(w http.ResponseWriter, op string, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrReadOnly):
		status = http.StatusConflict
	case errors.Is(err, store.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusServiceUnavailable
	}
	if status >= 500 {
		h.log.Error("config write failed", "op", op, "err", err)
	}
	writeError(w, status, err.Error())
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request) {
	// A read-only store is the answer whatever the body holds.
	wr, ok := h.writer(w)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	rs, err := config.Decode(sourceName(r), body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(rs) == 0 {
		writeError(w, http.StatusBadRequest, "no objects in the request: send YAML or JSON documents")
		return
	}
	before := h.d.Store.Revision()
	existed := make([]bool, len(rs))
	for i, res := range rs {
		_, existed[i] = h.d.Store.Get(res.Key())
	}
	rev, err := wr.Apply(r.Context(), rs)
	if err != nil {
		h.writeStoreError(w, "apply", err)
		return
	}
	resp := ApplyResponse{Revision: rev, Applied: make([]string, len(rs)), Objects: make([]ObjectResult, len(rs))}
	changed := 0
	for i, res := range rs {
		k := res.Key()
		resp.Applied[i] = k.String()
		// A batch that changes nothing is not written and returns the
		// revision it found; otherwise the store leaves an unchanged
		// object's resourceVersion alone, so an object carrying this
		// write's revision is one it changed. A concurrent writer can blur
		// the words printed; the write itself is unaffected.
		action := "unchanged"
		if cur, ok := h.d.Store.Get(k); ok && rev != before && cur.Meta.ResourceVersion == strconv.FormatInt(rev, 10) {
			action = "configured"
			if !existed[i] {
				action = "created"
			}
			changed++
		}
		resp.Objects[i] = ObjectResult{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Action: action}
	}
	h.log.Info("config applied", "revision", rev, "objects", len(rs), "changed", changed, "source", sourceName(r))
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	wr, ok := h.writer(w)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	keys, err := DecodeKeys(sourceName(r), body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if len(keys) == 0 {
		writeError(w, http.StatusBadRequest, "no objects in the request: send YAML or JSON documents naming them")
		return
	}
	rev, err := wr.Delete(r.Context(), keys)
	if err != nil {
		h.writeStoreError(w, "delete", err)
		return
	}
	resp := DeleteResponse{Revision: rev, Deleted: make([]string, len(keys)), Objects: make([]ObjectResult, len(keys))}
	for i, k := range keys {
		resp.Deleted[i] = k.String()
		resp.Objects[i] = ObjectResult{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Action: "deleted"}
	}
	h.log.Info("config deleted", "revision", rev, "objects", len(keys), "source", sourceName(r))
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	kind, err := ParseKind(r.PathValue("kind"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ns := r.URL.Query().Get("namespace")
	if kind.ClusterScoped() {
		ns = "" // as kubectl does, a namespace means nothing to these kinds
	}
	// The revision is read before listing, so it is never newer than what
	// the items show; a client that watches from it misses nothing.
	resp := ListResponse{Revision: h.d.Store.Revision(), Items: []json.RawMessage{}}
	for _, res := range h.d.Store.List(kind, ns) {
		b, err := config.Encode(res)
		if err != nil {
			h.log.Error("encoding a stored object", "key", res.Key(), "err", err)
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		resp.Items = append(resp.Items, b)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	kind, err := ParseKind(r.PathValue("kind"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	key := config.Key{Kind: kind, Name: r.PathValue("name")}
	if !kind.ClusterScoped() {
		key.Namespace = r.URL.Query().Get("namespace")
		if key.Namespace == "" {
			key.Namespace = "default"
		}
	}
	res, ok := h.d.Store.Get(key)
	if !ok {
		where := ""
		if key.Namespace != "" {
			where = fmt.Sprintf(" in namespace %q", excerpt.Value(key.Namespace))
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s %q not found%s", kind, excerpt.Value(key.Name), where))
		return
	}
	b, err := config.Encode(res)
	if err != nil {
		h.log.Error("encoding a stored object", "key", key, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeRawJSON(w, http.StatusOK, b)
}
