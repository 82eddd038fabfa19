package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func fakeDump(t *testing.T) *adminv3.ConfigDump {
	t.Helper()
	cluster, err := anypb.New(&clusterv3.Cluster{
		Name:           "outbound|9080||reviews.bookinfo.svc.cluster.local",
		ConnectTimeout: durationpb.New(10 * time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A filter config nested in a listener: its Any must resolve too.
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: "outbound_0.0.0.0_9080"})
	if err != nil {
		t.Fatal(err)
	}
	listener, err := anypb.New(&listenerv3.Listener{
		Name: "0.0.0.0_9080",
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	clusters, err := anypb.New(&adminv3.ClustersConfigDump{
		VersionInfo: "v1",
		DynamicActiveClusters: []*adminv3.ClustersConfigDump_DynamicCluster{{
			VersionInfo: "v1", Cluster: cluster,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	listeners, err := anypb.New(&adminv3.ListenersConfigDump{
		DynamicListeners: []*adminv3.ListenersConfigDump_DynamicListener{{
			Name:        "0.0.0.0_9080",
			ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{Listener: listener},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &adminv3.ConfigDump{Configs: []*anypb.Any{clusters, listeners}}
}

func TestConfigDump(t *testing.T) {
	dump := fakeDump(t)
	srv := newServer(t, Deps{
		Store: newDB(t),
		ConfigDump: func(id string) (*adminv3.ConfigDump, error) {
			switch id {
			case "sidecar~10.0.0.1~reviews-v1.bookinfo~bookinfo.svc.cluster.local":
				return dump, nil
			case "broken":
				return nil, fmt.Errorf("generating: boom")
			}
			return nil, fmt.Errorf("proxy %s: %w", id, ErrUnknownProxy)
		},
	})
	code, b := call(t, "GET", srv.URL+"/debug/config_dump?proxyID=sidecar~10.0.0.1~reviews-v1.bookinfo~bookinfo.svc.cluster.local", "")
	if code != 200 {
		t.Fatalf("config_dump: %d %s", code, b)
	}
	s := string(b)
	for _, want := range []string{
		`"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump"`,
		`"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster"`,
		`"name": "outbound|9080||reviews.bookinfo.svc.cluster.local"`,
		`"connectTimeout": "10s"`, // camelCase field names, as Envoy's admin prints them
		`"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"`,
		`"statPrefix": "outbound_0.0.0.0_9080"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("config dump lacks %s:\n%s", want, s)
		}
	}
	if strings.Count(s, "\n") < 10 {
		t.Errorf("config dump is not multi-line:\n%s", s)
	}
	var anyJSON map[string]any
	if err := json.Unmarshal(b, &anyJSON); err != nil {
		t.Errorf("config dump is not JSON: %v", err)
	}

	for _, c := range []struct {
		query string
		code  int
		want  string
	}{
		{"", 400, "proxyID is required"},
		{"?proxyID=nobody", 404, "unknown proxy"},
		{"?proxyID=broken", 500, "boom"},
	} {
		code, b := call(t, "GET", srv.URL+"/debug/config_dump"+c.query, "")
		if code != c.code || !strings.Contains(errorOf(t, b), c.want) {
			t.Errorf("config_dump%s: %d %s, want %d with %q", c.query, code, b, c.code, c.want)
		}
	}

	// Without an xDS server every proxy is unknown.
	bare := newServer(t, Deps{Store: newDB(t)})
	if code, b := call(t, "GET", bare.URL+"/debug/config_dump?proxyID=x", ""); code != 404 {
		t.Errorf("config_dump without a source: %d %s, want 404", code, b)
	}
}

func TestSynczAndPushStatus(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := newServer(t, Deps{
		Store: newDB(t),
		Syncz: func() []ProxySync {
			return []ProxySync{{
				ProxyID: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", ConnectionID: "a.ns-1", ConnectedAt: at,
				Types: []TypeSync{
					{Type: "cds", VersionSent: "3", NonceSent: "n3", VersionAcked: "3", NonceAcked: "n3", Synced: true},
					{Type: "lds", VersionSent: "3", NonceSent: "n4", VersionAcked: "2", NonceAcked: "n2", Nacks: 1, LastError: "bad listener"},
				},
			}}
		},
		PushStatus: func() any { return map[string]int{"pushes": 7} },
	})
	code, b := call(t, "GET", srv.URL+"/debug/syncz", "")
	if code != 200 {
		t.Fatalf("syncz: %d %s", code, b)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("syncz is not a JSON array: %v: %s", err, b)
	}
	if len(got) != 1 || got[0]["proxyID"] != "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local" ||
		got[0]["connectionID"] != "a.ns-1" || got[0]["connectedAt"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("syncz = %s", b)
	}
	types := got[0]["types"].([]any)
	lds := types[1].(map[string]any)
	if len(types) != 2 || lds["type"] != "lds" || lds["versionAcked"] != "2" || lds["synced"] != false ||
		lds["nacks"] != float64(1) || lds["lastError"] != "bad listener" {
		t.Errorf("syncz types = %v", types)
	}

	code, b = call(t, "GET", srv.URL+"/debug/push_status", "")
	if code != 200 || strings.TrimSpace(string(b)) != `{"pushes":7}` {
		t.Errorf("push_status: %d %s", code, b)
	}

	// With nothing behind them the endpoints still answer well-formed JSON.
	bare := newServer(t, Deps{Store: newDB(t)})
	if code, b := call(t, "GET", bare.URL+"/debug/syncz", ""); code != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("bare syncz: %d %s", code, b)
	}
	if code, b := call(t, "GET", bare.URL+"/debug/push_trace", ""); code != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("bare push_trace: %d %s", code, b)
	}
	if code, b := call(t, "GET", bare.URL+"/debug/push_status", ""); code != 200 || strings.TrimSpace(string(b)) != "{}" {
		t.Errorf("bare push_status: %d %s", code, b)
	}
}

// TestDumpTypesResolve guards the blank imports: every type the generators
// put in an Any must be known to the resolver, or the dump fails as a whole.
func TestDumpTypesResolve(t *testing.T) {
	for _, name := range []string{
		"envoy.config.cluster.v3.Cluster",
		"envoy.config.endpoint.v3.ClusterLoadAssignment",
		"envoy.config.listener.v3.Listener",
		"envoy.config.route.v3.RouteConfiguration",
		"envoy.extensions.transport_sockets.tls.v3.Secret",
		"envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
		"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
		"envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
		"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
		"envoy.extensions.filters.http.router.v3.Router",
		"envoy.extensions.filters.http.fault.v3.HTTPFault",
		"envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
		"envoy.extensions.filters.listener.original_dst.v3.OriginalDst",
		"envoy.extensions.filters.listener.http_inspector.v3.HttpInspector",
		"envoy.admin.v3.SecretsConfigDump",
		"envoy.admin.v3.EndpointsConfigDump",
	} {
		if _, err := dumpJSON.Resolver.FindMessageByURL("type.googleapis.com/" + name); err != nil {
			t.Errorf("%s does not resolve: %v", name, err)
		}
	}
}
