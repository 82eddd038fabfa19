package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/store"
	"github.com/meshperf/meshperf/internal/testutil"
)

const bookinfo = `apiVersion: v1
kind: Namespace
metadata:
  name: bookinfo
  labels: {team: books}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
---
# a comment-only document is skipped
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: bookinfo}
spec: {host: reviews}
---
apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata: {name: ratings}
spec: {host: ratings}
`

// badDoc is valid YAML that fails validation: a route without a host.
const badDoc = `---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: broken, namespace: bookinfo}
spec:
  hosts: [broken]
  http:
  - route:
    - destination: {}
`

func newDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newServer(t *testing.T, d Deps) *httptest.Server {
	t.Helper()
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	srv := httptest.NewServer(NewHandler(d))
	t.Cleanup(srv.Close)
	return srv
}

func dbServer(t *testing.T) (*httptest.Server, *store.DB) {
	db := newDB(t)
	return newServer(t, Deps{Store: db, Writer: db}), db
}

// call sends body as a client that is not a browser does: YAML on writes.
func call(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	headers := map[string]string{}
	if method != http.MethodGet {
		headers["Content-Type"] = "application/yaml"
	}
	return testutil.Send(t, method, url, body, headers)
}

// errorOf checks that b is exactly one line of {"error": ...} and returns
// the message.
func errorOf(t *testing.T, b []byte) string {
	t.Helper()
	if strings.Count(string(b), "\n") != 1 || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("error body is not one line: %q", b)
	}
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("error body %q is not {\"error\": ...}: %v", b, err)
	}
	return e.Error
}

func TestApplyMultiDocument(t *testing.T) {
	srv, db := dbServer(t)
	code, b := call(t, "POST", srv.URL+"/api/v1/apply?file=bookinfo.yaml", bookinfo)
	if code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	var resp ApplyResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	want := []string{"Namespace/bookinfo", "VirtualService/bookinfo/reviews", "DestinationRule/bookinfo/reviews", "DestinationRule/default/ratings"}
	if !slices.Equal(resp.Applied, want) {
		t.Errorf("applied = %v, want %v", resp.Applied, want)
	}
	if resp.Revision != 1 || db.Revision() != 1 {
		t.Errorf("revision = %d (store %d), want 1: one apply is one write", resp.Revision, db.Revision())
	}
	for _, o := range resp.Objects {
		if o.Action != "created" {
			t.Errorf("%s/%s: action %q, want created", o.Kind, o.Name, o.Action)
		}
	}
	if _, ok := db.Get(config.Key{Kind: config.KindDestinationRule, Namespace: "default", Name: "ratings"}); !ok {
		t.Error("ratings was not stored in namespace default")
	}

	// Applying again changes nothing and writes nothing.
	code, b = call(t, "POST", srv.URL+"/api/v1/apply", bookinfo)
	resp = ApplyResponse{}
	if err := json.Unmarshal(b, &resp); err != nil || code != 200 {
		t.Fatalf("identical re-apply: %d %s", code, b)
	}
	for _, o := range resp.Objects {
		if o.Action != "unchanged" || resp.Revision != 1 {
			t.Errorf("identical re-apply: %s/%s %s at revision %d, want unchanged at 1", o.Kind, o.Name, o.Action, resp.Revision)
		}
	}

	// Changing one object configures it.
	changed := strings.Replace(bookinfo, "{host: ratings}", "{host: ratings.default.svc.cluster.local}", 1)
	code, b = call(t, "POST", srv.URL+"/api/v1/apply", changed)
	if code != 200 {
		t.Fatalf("re-apply: %d %s", code, b)
	}
	resp = ApplyResponse{}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	actions := make([]string, len(resp.Objects))
	for i, o := range resp.Objects {
		actions[i] = o.Action
	}
	if want := []string{"unchanged", "unchanged", "unchanged", "configured"}; !slices.Equal(actions, want) || resp.Revision != 2 {
		t.Errorf("re-apply: actions %v revision %d, want %v revision 2", actions, resp.Revision, want)
	}
}

func TestApplyIsAtomic(t *testing.T) {
	srv, db := dbServer(t)
	code, b := call(t, "POST", srv.URL+"/api/v1/apply?file=mixed.yaml", bookinfo+badDoc)
	if code != http.StatusBadRequest {
		t.Fatalf("apply with a bad document: %d %s, want 400", code, b)
	}
	msg := errorOf(t, b)
	for _, want := range []string{"mixed.yaml", "document 5", "VirtualService bookinfo/broken", "destination.host"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if db.Revision() != 0 || len(db.List(config.KindNamespace, "")) != 0 {
		t.Errorf("a rejected apply wrote something: revision %d", db.Revision())
	}

	// The same key twice is the store's objection, also a 400.
	code, b = call(t, "POST", srv.URL+"/api/v1/apply", bookinfo+"---\n"+bookinfo)
	if code != http.StatusBadRequest || !strings.Contains(errorOf(t, b), "twice") {
		t.Errorf("duplicate keys: %d %s, want 400 naming the duplicate", code, b)
	}
	code, b = call(t, "POST", srv.URL+"/api/v1/apply", "# nothing\n")
	if code != http.StatusBadRequest {
		t.Errorf("empty apply: %d %s, want 400", code, b)
	}
	if db.Revision() != 0 {
		t.Errorf("revision %d after rejected applies", db.Revision())
	}
}

func TestGet(t *testing.T) {
	srv, _ := dbServer(t)
	if code, b := call(t, "POST", srv.URL+"/api/v1/apply", bookinfo); code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	list := func(path string) ListResponse {
		t.Helper()
		code, b := call(t, "GET", srv.URL+path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		var l ListResponse
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	names := func(l ListResponse) []string {
		var out []string
		for _, it := range l.Items {
			rs, err := config.Decode("item", it)
			if err != nil {
				t.Fatalf("item does not decode: %v", err)
			}
			out = append(out, rs[0].Key().String())
		}
		return out
	}
	for path, want := range map[string][]string{
		"/api/v1/resources/DestinationRule":                     {"DestinationRule/bookinfo/reviews", "DestinationRule/default/ratings"},
		"/api/v1/resources/destinationrules?namespace=bookinfo": {"DestinationRule/bookinfo/reviews"},
		"/api/v1/resources/destinationrule?namespace=nowhere":   nil,
		"/api/v1/resources/namespaces?namespace=ignored-for-ns": {"Namespace/bookinfo"},
		"/api/v1/resources/VIRTUALSERVICES":                     {"VirtualService/bookinfo/reviews"},
		"/api/v1/resources/serviceentries":                      nil,
		"/api/v1/resources/PeerAuthentications?namespace=istio": nil,
	} {
		l := list(path)
		if got := names(l); !slices.Equal(got, want) {
			t.Errorf("GET %s: %v, want %v", path, got, want)
		}
		if l.Revision != 1 || l.Items == nil {
			t.Errorf("GET %s: revision %d, items nil %v; want 1 and []", path, l.Revision, l.Items == nil)
		}
	}

	code, b := call(t, "GET", srv.URL+"/api/v1/resources/virtualservice/reviews?namespace=bookinfo", "")
	if code != 200 {
		t.Fatalf("get one: %d %s", code, b)
	}
	rs, err := config.Decode("one", b)
	if err != nil || len(rs) != 1 || rs[0].Meta.Name != "reviews" || rs[0].Meta.ResourceVersion != "1" {
		t.Errorf("get one: %s (%v)", b, err)
	}
	// Without a namespace a name is looked up in "default", like kubectl.
	if code, b := call(t, "GET", srv.URL+"/api/v1/resources/destinationrule/ratings", ""); code != 200 {
		t.Errorf("get in default: %d %s", code, b)
	}
	if code, b := call(t, "GET", srv.URL+"/api/v1/resources/namespace/bookinfo?namespace=x", ""); code != 200 {
		t.Errorf("get a cluster-scoped object: %d %s", code, b)
	}
	code, b = call(t, "GET", srv.URL+"/api/v1/resources/virtualservice/reviews", "")
	if code != 404 || !strings.Contains(errorOf(t, b), `"reviews" not found in namespace "default"`) {
		t.Errorf("get missing: %d %s", code, b)
	}
	code, b = call(t, "GET", srv.URL+"/api/v1/resources/pods", "")
	if code != 400 || !strings.Contains(errorOf(t, b), "VirtualService, DestinationRule") {
		t.Errorf("unknown kind: %d %s, want 400 listing the kinds", code, b)
	}
}

func TestDelete(t *testing.T) {
	srv, db := dbServer(t)
	if code, b := call(t, "POST", srv.URL+"/api/v1/apply", bookinfo); code != 200 {
		t.Fatalf("apply: %d %s", code, b)
	}
	// A stub without a spec names what to delete; so does a List.
	body := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
---
apiVersion: v1
kind: List
items:
- {apiVersion: networking.istio.io/v1, kind: DestinationRule, metadata: {name: ratings}}
`
	code, b := call(t, "POST", srv.URL+"/api/v1/delete", body)
	if code != 200 {
		t.Fatalf("delete: %d %s", code, b)
	}
	var resp DeleteResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if want := []string{"VirtualService/bookinfo/reviews", "DestinationRule/default/ratings"}; !slices.Equal(resp.Deleted, want) || resp.Revision != 2 {
		t.Errorf("deleted %v at %d, want %v at 2", resp.Deleted, resp.Revision, want)
	}
	if _, ok := db.Get(config.Key{Kind: config.KindVirtualService, Namespace: "bookinfo", Name: "reviews"}); ok {
		t.Error("reviews is still stored")
	}

	// One missing key fails the whole delete, naming it.
	body = `{"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "metadata": {"name": "reviews", "namespace": "bookinfo"}}
---
{"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule", "metadata": {"name": "gone", "namespace": "bookinfo"}}`
	code, b = call(t, "POST", srv.URL+"/api/v1/delete", body)
	if code != 404 || !strings.Contains(errorOf(t, b), "DestinationRule/bookinfo/gone") {
		t.Errorf("delete missing: %d %s, want 404 naming it", code, b)
	}
	if _, ok := db.Get(config.Key{Kind: config.KindDestinationRule, Namespace: "bookinfo", Name: "reviews"}); !ok || db.Revision() != 2 {
		t.Error("a failed delete removed something")
	}

	for _, bad := range []string{"kind: Pod\nmetadata: {name: p}\n", "kind: Sidecar\nmetadata: {namespace: x}\n", "[1, 2]", "a: [b\n"} {
		code, b = call(t, "POST", srv.URL+"/api/v1/delete?file=bad.yaml", bad)
		if code != 400 || !strings.Contains(errorOf(t, b), "bad.yaml: document 1") {
			t.Errorf("delete %q: %d %s, want 400 naming the document", bad, code, b)
		}
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bookinfo.yaml"), []byte(bookinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := store.OpenDir(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for name, deps := range map[string]Deps{
		"nil writer": {Store: d, ConfigDir: dir},
		"dir writer": {Store: d, Writer: d},
	} {
		srv := newServer(t, deps)
		for _, path := range []string{"/api/v1/apply", "/api/v1/delete"} {
			code, b := call(t, "POST", srv.URL+path, bookinfo)
			if code != http.StatusConflict || !strings.Contains(errorOf(t, b), "--configDir "+dir) {
				t.Errorf("%s: POST %s: %d %s, want 409 naming the directory", name, path, code, b)
			}
		}
		// Reads still work.
		if code, b := call(t, "GET", srv.URL+"/api/v1/resources/virtualservice/reviews?namespace=bookinfo", ""); code != 200 {
			t.Errorf("%s: get: %d %s", name, code, b)
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	srv, db := dbServer(t)
	big := strings.Repeat("# padding padding padding padding padding padding\n", MaxBodyBytes/50+10)
	for _, path := range []string{"/api/v1/apply", "/api/v1/delete"} {
		code, b := call(t, "POST", srv.URL+path, bookinfo+big)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s with %d bytes: %d %s, want 413", path, len(big), code, b)
		} else {
			errorOf(t, b)
		}
	}
	if db.Revision() != 0 {
		t.Error("an oversized apply wrote something")
	}
}

func TestMethodsAndUnknownPaths(t *testing.T) {
	srv, _ := dbServer(t)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/api/v1/apply", "POST"},
		{"PUT", "/api/v1/delete", "POST"},
		{"POST", "/api/v1/resources/virtualservice", "GET, HEAD"},
		{"DELETE", "/api/v1/resources/virtualservice/x", "GET, HEAD"},
		{"POST", "/debug/syncz", "GET, HEAD"},
		{"POST", "/ready", "GET, HEAD"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
			continue
		}
		errorOf(t, b)
	}
	code, b := call(t, "GET", srv.URL+"/api/v2/nothing", "")
	if code != 404 {
		t.Errorf("unknown path: %d %s", code, b)
	} else {
		errorOf(t, b)
	}
	code, b = call(t, "GET", srv.URL+"/ready", "")
	if code != 200 || string(b) != "ok\n" {
		t.Errorf("/ready: %d %q", code, b)
	}
}

func TestParseKind(t *testing.T) {
	for in, want := range map[string]config.Kind{
		"VirtualService": config.KindVirtualService, "virtualservice": config.KindVirtualService,
		"virtualservices": config.KindVirtualService, "serviceentries": config.KindServiceEntry,
		"ServiceEntry": config.KindServiceEntry, "namespaces": config.KindNamespace,
		"Services": config.KindService, "peerauthentications": config.KindPeerAuthentication,
		"vs": config.KindVirtualService, "DR": config.KindDestinationRule, "se": config.KindServiceEntry, "svc": config.KindService,
		"VirtualService.networking.istio.io": config.KindVirtualService, "authorizationpolicies.security.istio.io": config.KindAuthorizationPolicy,
		// A bare Gateway is Istio's; the Gateway API's is named with its group.
		"gateway": config.KindGateway, "gateways": config.KindGateway, "gw": config.KindGateway,
		"gateway.networking.istio.io":       config.KindGateway,
		"Gateway.gateway.networking.k8s.io": config.KindKubernetesGateway, "gateways.gateway.networking.k8s.io": config.KindKubernetesGateway,
	} {
		if got, err := ParseKind(in); got != want || err != nil {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "vss", "serviceentrys", "pod", "VirtualService.security.istio.io", "gateway.networking.k8s.io"} {
		if _, err := ParseKind(in); err == nil || !strings.Contains(err.Error(), "supported kinds: Namespace") {
			t.Errorf("ParseKind(%q): %v, want an error listing the kinds", in, err)
		}
	}
}

func TestDecodeKeys(t *testing.T) {
	keys, err := DecodeKeys("f.yaml", []byte(bookinfo+badDoc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.String())
	}
	want := []string{"Namespace/bookinfo", "VirtualService/bookinfo/reviews", "DestinationRule/bookinfo/reviews",
		"DestinationRule/default/ratings", "VirtualService/bookinfo/broken"}
	if !slices.Equal(got, want) {
		t.Errorf("DecodeKeys = %v, want %v (an invalid spec does not matter for a delete)", got, want)
	}
	// Documents are counted as config.Decode counts them.
	_, err = DecodeKeys("f.yaml", []byte(bookinfo+"---\nkind: VirtualService\nmetadata: {namespace: a}\n"))
	if err == nil || err.Error() != "f.yaml: document 5 (VirtualService): metadata.name: required" {
		t.Errorf("missing name: %v", err)
	}
}
