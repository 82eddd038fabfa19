package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/meshperf/meshperf/internal/excerpt"

	// The config dump packs every resource and filter config in an Any;
	// protojson can only print an Any whose type is linked into the binary.
	// These are the types the generators emit, so the dump never fails on
	// them even if this binary's xDS server happens not to import one.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// dumpJSON prints config dumps as Envoy's admin endpoint does: camelCase
// field names and Any values expanded with their "@type". The indentation is
// redone with encoding/json because protojson varies its whitespace from
// build to build on purpose, and operators compare dump sizes and diff dumps.
var dumpJSON = protojson.MarshalOptions{
	UseProtoNames: false,
	Resolver:      protoregistry.GlobalTypes,
}

// marshalDump returns the dump as stable, two-space indented JSON.
func marshalDump(dump *adminv3.ConfigDump) ([]byte, error) {
	raw, err := dumpJSON.Marshal(dump)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(raw) + len(raw)/2)
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (h *handler) configDump(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("proxyID")
	if id == "" {
		writeError(w, http.StatusBadRequest, "proxyID is required: /debug/config_dump?proxyID=ID (IDs are listed by /debug/syncz)")
		return
	}
	if h.d.ConfigDump == nil {
		writeError(w, http.StatusNotFound, "proxy "+excerpt.Quote(id)+": "+ErrUnknownProxy.Error()+" (no xDS server behind this endpoint)")
		return
	}
	dump, err := h.d.ConfigDump(id)
	switch {
	case errors.Is(err, ErrUnknownProxy):
		writeError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		h.log.Error("config dump failed", "proxyID", id, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	b, err := marshalDump(dump)
	if err != nil {
		h.log.Error("encoding a config dump", "proxyID", id, "err", err)
		writeError(w, http.StatusInternalServerError, "encoding the config dump: "+err.Error())
		return
	}
	writeRawJSON(w, http.StatusOK, b)
}

func (h *handler) syncz(w http.ResponseWriter, _ *http.Request) {
	out := []ProxySync{}
	if h.d.Syncz != nil {
		if s := h.d.Syncz(); s != nil {
			out = s
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) pushTrace(w http.ResponseWriter, _ *http.Request) {
	var v any = []struct{}{}
	if h.d.PushTrace != nil {
		if t := h.d.PushTrace(); t != nil {
			v = t
		}
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *handler) pushStatus(w http.ResponseWriter, _ *http.Request) {
	var v any = struct{}{}
	if h.d.PushStatus != nil {
		if s := h.d.PushStatus(); s != nil {
			v = s
		}
	}
	writeJSON(w, http.StatusOK, v)
}
