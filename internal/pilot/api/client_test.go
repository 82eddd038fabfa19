package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func newClient(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	c, err := NewClient(srv.URL, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkOneLine fails unless err is a printable one-line message.
func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
		t.Errorf("error is not one line: %q", msg)
	}
}

// statusOf returns the HTTP status and message of a *StatusError.
func statusOf(t *testing.T, err error) (int, string) {
	t.Helper()
	checkOneLine(t, err)
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("%v (%T) is not a *StatusError", err, err)
	}
	return se.Code, se.Message
}

func keyStrings(rs []*config.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Key().String()
	}
	return out
}

func TestClientApplyListGetDelete(t *testing.T) {
	srv, db := dbServer(t)
	c := newClient(t, srv)
	ctx := context.Background()

	resp, err := c.Apply(ctx, "bookinfo.yaml", []byte(bookinfo))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	want := []string{"Namespace/bookinfo", "VirtualService/bookinfo/reviews", "DestinationRule/bookinfo/reviews", "DestinationRule/default/ratings"}
	if !slices.Equal(resp.Applied, want) || resp.Revision != 1 || db.Revision() != 1 {
		t.Errorf("apply: %v at revision %d (store %d), want %v at 1", resp.Applied, resp.Revision, db.Revision(), want)
	}

	drs, rev, err := c.List(ctx, config.KindDestinationRule, "")
	if err != nil || rev != 1 || !slices.Equal(keyStrings(drs), []string{"DestinationRule/bookinfo/reviews", "DestinationRule/default/ratings"}) {
		t.Errorf("list every namespace: %v at revision %d, %v", keyStrings(drs), rev, err)
	}
	drs, _, err = c.List(ctx, config.KindDestinationRule, "bookinfo")
	if err != nil || !slices.Equal(keyStrings(drs), []string{"DestinationRule/bookinfo/reviews"}) {
		t.Errorf("list bookinfo: %v, %v", keyStrings(drs), err)
	}
	if none, _, err := c.List(ctx, config.KindGateway, ""); err != nil || len(none) != 0 {
		t.Errorf("list of an empty kind: %v, %v", keyStrings(none), err)
	}

	vs, err := c.Get(ctx, config.Key{Kind: config.KindVirtualService, Namespace: "bookinfo", Name: "reviews"})
	if err != nil || vs.Key().String() != "VirtualService/bookinfo/reviews" || vs.Meta.ResourceVersion != "1" {
		t.Fatalf("get: %v, %v", vs, err)
	}
	// A namespaced kind without a namespace is looked up in "default".
	if r, err := c.Get(ctx, config.Key{Kind: config.KindDestinationRule, Name: "ratings"}); err != nil || r.Meta.Namespace != "default" {
		t.Errorf("get in default: %v, %v", r, err)
	}
	_, err = c.Get(ctx, config.Key{Kind: config.KindVirtualService, Name: "reviews"})
	if code, msg := statusOf(t, err); code != http.StatusNotFound || msg != `VirtualService "reviews" not found in namespace "default"` {
		t.Errorf("get missing: %d %q", code, msg)
	}

	// A delete naming a missing object deletes nothing.
	missing := config.Key{Kind: config.KindVirtualService, Namespace: "bookinfo", Name: "gone"}
	ratings := config.Key{Kind: config.KindDestinationRule, Namespace: "default", Name: "ratings"}
	_, err = c.DeleteKeys(ctx, []config.Key{ratings, missing})
	if code, msg := statusOf(t, err); code != http.StatusNotFound || !strings.Contains(msg, "VirtualService/bookinfo/gone") {
		t.Errorf("delete of a missing object: %d %q", code, msg)
	}
	if _, ok := db.Get(ratings); !ok || db.Revision() != 1 {
		t.Errorf("a refused delete wrote: ratings kept %v, revision %d", ok, db.Revision())
	}
	del, err := c.DeleteKeys(ctx, []config.Key{ratings, {Kind: config.KindNamespace, Name: "bookinfo"}})
	if err != nil || !slices.Equal(del.Deleted, []string{"DestinationRule/default/ratings", "Namespace/bookinfo"}) || del.Revision != 2 {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	if _, ok := db.Get(ratings); ok {
		t.Error("ratings is still stored after its delete")
	}

	// Delete of documents reads only their identity, as kubectl does.
	stub := "kind: VirtualService\nmetadata: {name: reviews, namespace: bookinfo}\n"
	if del, err := c.Delete(ctx, "stub.yaml", []byte(stub)); err != nil || !slices.Equal(del.Deleted, []string{"VirtualService/bookinfo/reviews"}) {
		t.Errorf("delete by stub: %+v, %v", del, err)
	}
}

// Istio's Gateway and the Gateway API's share a kind name and here a
// namespace and a name: they are two objects, applied, read and deleted
// apart, told apart by apiVersion in files and by group in kind names.
func TestClientTwoGatewaysOfOneName(t *testing.T) {
	srv, _ := dbServer(t)
	c := newClient(t, srv)
	ctx := context.Background()
	const istioGateway = `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: shop}
spec:
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
`
	const waypoint = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: waypoint, namespace: shop}
spec:
  gatewayClassName: istio-waypoint
  listeners: [{name: mesh, port: 15008, protocol: HBONE}]
  addresses: [{value: 10.1.0.9}]
`
	resp, err := c.Apply(ctx, "gateways.yaml", []byte(istioGateway+"---\n"+waypoint))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Gateway/shop/waypoint", "Gateway.gateway.networking.k8s.io/shop/waypoint"}; !slices.Equal(resp.Applied, want) {
		t.Fatalf("applied %v, want %v", resp.Applied, want)
	}
	istio, _, err := c.List(ctx, config.KindGateway, "shop")
	if err != nil || len(istio) != 1 || istio[0].APIVersion != "networking.istio.io/v1" {
		t.Errorf("Istio's Gateways: %v, %v", keyStrings(istio), err)
	}
	wp, err := c.Get(ctx, config.Key{Kind: config.KindKubernetesGateway, Namespace: "shop", Name: "waypoint"})
	if err != nil || wp.APIVersion != "gateway.networking.k8s.io/v1" || config.WaypointAddress(wp.Spec.(*gatewayv1.GatewaySpec)) != "10.1.0.9" {
		t.Fatalf("the waypoint Gateway: %v, %v", wp, err)
	}
	del, err := c.Delete(ctx, "waypoint.yaml", []byte(waypoint))
	if err != nil || !slices.Equal(del.Deleted, []string{"Gateway.gateway.networking.k8s.io/shop/waypoint"}) {
		t.Fatalf("delete of the waypoint: %+v, %v", del, err)
	}
	if istio, _, err := c.List(ctx, config.KindGateway, "shop"); err != nil || len(istio) != 1 {
		t.Errorf("deleting the waypoint deleted Istio's Gateway: %v, %v", keyStrings(istio), err)
	}
}

func TestClientApplyResourcesRoundTrip(t *testing.T) {
	srv, db := dbServer(t)
	c := newClient(t, srv)
	ctx := context.Background()
	rs, err := config.Decode("bookinfo.yaml", []byte(bookinfo))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.ApplyResources(ctx, rs)
	if err != nil {
		t.Fatalf("apply resources: %v", err)
	}
	for _, o := range resp.Objects {
		if o.Action != "created" {
			t.Errorf("%s/%s: %s, want created", o.Kind, o.Name, o.Action)
		}
	}
	// What the client reads back is what it sent: applying it again
	// changes nothing.
	got, _, err := c.List(ctx, config.KindDestinationRule, "")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.ApplyResources(ctx, got)
	if err != nil || again.Revision != 1 || db.Revision() != 1 {
		t.Fatalf("re-apply of what was listed: %+v, %v (store revision %d)", again, err, db.Revision())
	}
	for _, o := range again.Objects {
		if o.Action != "unchanged" {
			t.Errorf("re-apply: %s/%s %s, want unchanged", o.Kind, o.Name, o.Action)
		}
	}
}

func TestClientRefusals(t *testing.T) {
	srv, db := dbServer(t)
	c := newClient(t, srv)
	ctx := context.Background()

	// The source name reaches the server and comes back in its message.
	_, err := c.Apply(ctx, "mixed.yaml", []byte(bookinfo+badDoc))
	code, msg := statusOf(t, err)
	if code != http.StatusBadRequest || !strings.HasPrefix(msg, "mixed.yaml: document 5") || !strings.Contains(msg, "destination.host") {
		t.Errorf("invalid apply: %d %q", code, msg)
	}
	if _, err := c.Apply(ctx, "", []byte("# nothing\n")); err == nil {
		t.Error("an empty apply was accepted")
	} else if code, _ := statusOf(t, err); code != http.StatusBadRequest {
		t.Errorf("empty apply: %d, want 400", code)
	}
	if db.Revision() != 0 {
		t.Errorf("refused applies wrote: revision %d", db.Revision())
	}

	// A store fed from --configDir takes no writes.
	ro := newServer(t, Deps{Store: newDB(t), ConfigDir: "/etc/mesh"})
	_, err = newClient(t, ro).Apply(ctx, "", []byte(bookinfo))
	if code, msg := statusOf(t, err); code != http.StatusConflict || !strings.Contains(msg, "/etc/mesh") {
		t.Errorf("apply to a read-only store: %d %q", code, msg)
	}
}

func TestClientDebugEndpoints(t *testing.T) {
	dump := fakeDump(t)
	const proxy = "sidecar~10.0.0.1~reviews-v1.bookinfo~bookinfo.svc.cluster.local"
	srv := newServer(t, Deps{
		Store: newDB(t),
		ConfigDump: func(id string) (*adminv3.ConfigDump, error) {
			if id == proxy {
				return dump, nil
			}
			return nil, fmt.Errorf("proxy %s: %w", id, ErrUnknownProxy)
		},
		Syncz: func() []ProxySync {
			return []ProxySync{{ProxyID: proxy, ConnectionID: "reviews-v1.bookinfo-1",
				Types: []TypeSync{{Type: "lds", VersionSent: "3", VersionAcked: "2", Nacks: 1, LastError: "bad listener"}}}}
		},
		PushStatus: func() any { return map[string]int{"pushes": 7} },
	})
	c := newClient(t, srv)
	ctx := context.Background()

	if err := c.Ready(ctx); err != nil {
		t.Errorf("ready: %v", err)
	}
	b, err := c.ConfigDump(ctx, proxy)
	var parsed map[string]any
	if err != nil || json.Unmarshal(b, &parsed) != nil || !strings.Contains(string(b), `"name": "outbound|9080||reviews.bookinfo.svc.cluster.local"`) {
		t.Errorf("config dump: %v:\n%s", err, b)
	}
	_, err = c.ConfigDump(ctx, "nobody")
	if code, msg := statusOf(t, err); code != http.StatusNotFound || !strings.Contains(msg, "unknown proxy") {
		t.Errorf("dump of an unknown proxy: %d %q", code, msg)
	}

	sync, err := c.SyncStatus(ctx)
	if err != nil || len(sync) != 1 || sync[0].ProxyID != proxy || len(sync[0].Types) != 1 {
		t.Fatalf("sync status: %+v, %v", sync, err)
	}
	if ts := sync[0].Types[0]; ts.Type != "lds" || ts.VersionAcked != "2" || ts.Nacks != 1 || ts.LastError != "bad listener" || ts.Synced {
		t.Errorf("sync status of lds: %+v", ts)
	}
	ps, err := c.PushStatus(ctx)
	if err != nil || strings.TrimSpace(string(ps)) != `{"pushes":7}` {
		t.Errorf("push status: %s, %v", ps, err)
	}
}

func TestClientUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	c, err := NewClient(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Apply(context.Background(), "", []byte(bookinfo))
	checkOneLine(t, err)
	var ue *UnreachableError
	if !errors.As(err, &ue) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("%v (%T): want an *UnreachableError for a refused connection", err, err)
	}
	if want := "cannot reach the control plane at " + base + " (is meshperf pilot running?): "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("%q does not start with %q", err, want)
	}

	// A call given up by its caller is unreachable too, and says why.
	hung := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hung }))
	defer slow.Close()
	defer close(hung)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = newClient(t, slow).Ready(ctx)
	if !errors.As(err, &ue) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v (%T), want an *UnreachableError wrapping context.Canceled", err, err)
	}
}

// TestClientNotTheAPI: a server that is not meshperf pilot's API (a proxy's
// error page, another program on the port) is named as such.
func TestClientNotTheAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>\n<body>more</body>", http.StatusBadGateway)
	}))
	defer srv.Close()
	_, _, err := newClient(t, srv).List(context.Background(), config.KindService, "")
	code, msg := statusOf(t, err)
	want := "the control plane at " + srv.URL + " answered 502 Bad Gateway: <html>bad gateway</html> (is that meshperf pilot's API address"
	if code != http.StatusBadGateway || !strings.HasPrefix(msg, want) {
		t.Errorf("%d %q, want 502 and %q...", code, msg, want)
	}

	// A 200 that is not the API's JSON is refused, not half-read.
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html>welcome</html>"))
	}))
	defer html.Close()
	_, err = newClient(t, html).SyncStatus(context.Background())
	checkOneLine(t, err)
	if !strings.Contains(err.Error(), "sent an answer this meshperf cannot read") {
		t.Errorf("HTML answer: %v", err)
	}
}

func TestNewClientAddresses(t *testing.T) {
	for base, want := range map[string]string{
		"127.0.0.1:15016":                "http://127.0.0.1:15016",
		"http://127.0.0.1:15016/":        "http://127.0.0.1:15016",
		"https://pilot.example:443":      "https://pilot.example:443",
		"http://[::1]:15016":             "http://[::1]:15016",
		"http://gateway.example/meshapi": "http://gateway.example/meshapi",
	} {
		c, err := NewClient(base, nil)
		if err != nil || c.URL() != want {
			t.Errorf("NewClient(%q): %v, %v; want %s", base, c, err, want)
		}
	}
	for base, want := range map[string]string{
		"":                         "empty",
		"ftp://pilot:21":           "want http://host:port",
		"http://":                  "want http://host:port",
		"127.0.0.1:99999":          `port "99999" is not a number from 1 to 65535`,
		"http://127.0.0.1:0":       `port "0"`,
		"http://127.0.0.1:":        `port ""`,
		"http://h:15016/?watch=1":  "without a query",
		"http://user@h:15016":      "without a query, fragment or user",
		"http://h:15016/api#frag":  "without a query",
		"http://bad host name:1/x": "want http://host:port",
	} {
		_, err := NewClient(base, nil)
		if err == nil {
			t.Errorf("NewClient(%q) accepted", base)
			continue
		}
		checkOneLine(t, err)
		if !strings.HasPrefix(err.Error(), fmt.Sprintf("control plane address %q: ", base)) || !strings.Contains(err.Error(), want) {
			t.Errorf("NewClient(%q): %q, want the address and %q", base, err, want)
		}
	}
}

// TestClientSendsUnderAPrefix: a base URL with a path (the API behind a
// gateway) keeps it in front of every endpoint.
func TestClientSendsUnderAPrefix(t *testing.T) {
	db := newDB(t)
	mux := http.NewServeMux()
	mux.Handle("/meshapi/", http.StripPrefix("/meshapi", NewHandler(Deps{Store: db, Writer: db})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := NewClient(srv.URL+"/meshapi/", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(context.Background(), "", []byte(bookinfo)); err != nil {
		t.Fatalf("apply under a prefix: %v", err)
	}
	if rs, _, err := c.List(context.Background(), config.KindNamespace, ""); err != nil || len(rs) != 1 {
		t.Errorf("list under a prefix: %v, %v", keyStrings(rs), err)
	}
}
