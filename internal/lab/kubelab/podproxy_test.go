package kubelab

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

// Reads through the API server's pod proxy name localhost as their Host,
// whatever the kubeconfig calls the API server: the pod proxy passes the
// Host on, and meshperf-proxy's admin refuses a name it was not given.
func TestPodProxyReadsNameLocalhost(t *testing.T) {
	var host, path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, path = r.Host, r.URL.Path
		_, _ = w.Write([]byte("istio_requests_total 1\n"))
	}))
	defer srv.Close()
	client, err := podProxyClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	body, err := (&Cluster{podProxy: client}).podProxyGet(context.Background(), "bench", "client-1", 15000, "stats/prometheus")
	if err != nil || body != "istio_requests_total 1\n" {
		t.Fatalf("podProxyGet = %q, %v", body, err)
	}
	if host != "localhost" || path != "/api/v1/namespaces/bench/pods/client-1:15000/proxy/stats/prometheus" {
		t.Errorf("the API server was asked for %s with Host %q; want the pod proxy's path with Host localhost", path, host)
	}
}
