package sim

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClusterEDSName(t *testing.T) {
	eds := &clusterv3.Cluster{
		Name:                 "outbound|80||cart.shop.svc.cluster.local",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{ServiceName: "outbound|80||cart.shop.svc.cluster.local"},
	}
	named := &clusterv3.Cluster{
		Name:                 "outbound|80|v1|cart.shop.svc.cluster.local",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
	}
	static := &clusterv3.Cluster{
		Name:                 "BlackHoleCluster",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
	}
	for _, tc := range []struct {
		c         *clusterv3.Cluster
		wantEDS   string
		wantIsEDS bool
	}{
		{eds, "outbound|80||cart.shop.svc.cluster.local", true},
		{named, "outbound|80|v1|cart.shop.svc.cluster.local", true}, // no service_name: its own name
		{static, "BlackHoleCluster", false},
	} {
		name, got, isEDS := clusterEDSName(mustMarshal(t, tc.c))
		if name != tc.c.Name || got != tc.wantEDS || isEDS != tc.wantIsEDS {
			t.Errorf("%s: got (%q, %q, %v), want (%q, %q, %v)", tc.c.Name, name, got, isEDS, tc.c.Name, tc.wantEDS, tc.wantIsEDS)
		}
		if rn := resourceName(mustMarshal(t, tc.c)); rn != tc.c.Name {
			t.Errorf("resourceName = %q, want %q", rn, tc.c.Name)
		}
	}
}

func hcmFilter(t *testing.T, hcm *hcmv3.HttpConnectionManager) *listenerv3.Filter {
	a, err := anypb.New(hcm)
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}
}

func TestListenerRouteNames(t *testing.T) {
	rds := func(name string) *hcmv3.HttpConnectionManager {
		return &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: name}}}
	}
	inline := &hcmv3.HttpConnectionManager{RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{Name: "inbound|8080||"}}}
	l := &listenerv3.Listener{
		Name: "0.0.0.0_80",
		FilterChains: []*listenerv3.FilterChain{
			{Filters: []*listenerv3.Filter{hcmFilter(t, rds("80"))}},
			{Filters: []*listenerv3.Filter{hcmFilter(t, inline)}},
			{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy"}}},
		},
		DefaultFilterChain: &listenerv3.FilterChain{Filters: []*listenerv3.Filter{hcmFilter(t, rds("8080"))}},
	}
	name, routes := listenerRouteNames(mustMarshal(t, l))
	if name != "0.0.0.0_80" || !slices.Equal(routes, []string{"80", "8080"}) {
		t.Errorf("got %q %q, want 0.0.0.0_80 [80 8080]", name, routes)
	}
}

func TestVirtualHostNames(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{
		{Name: "cart.shop.svc.cluster.local:80"}, {Name: "allow_any"},
	}}
	var got []string
	virtualHostNames(mustMarshal(t, rc), func(s string) { got = append(got, s) })
	if !slices.Equal(got, []string{"cart.shop.svc.cluster.local:80", "allow_any"}) {
		t.Errorf("got %q", got)
	}
}

// TestNamesMalformed feeds truncated and garbage input: a load client must
// read what it can and never panic.
func TestNamesMalformed(t *testing.T) {
	l := mustMarshal(t, &listenerv3.Listener{Name: "0.0.0.0_80", FilterChains: []*listenerv3.FilterChain{
		{Filters: []*listenerv3.Filter{hcmFilter(t, &hcmv3.HttpConnectionManager{
			RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: "80"}}})}}}})
	for i := range l {
		listenerRouteNames(l[:i])
		clusterEDSName(l[:i])
		virtualHostNames(l[:i], func(string) {})
	}
	for _, b := range [][]byte{{0xff}, {0x0a, 0xff, 0xff}, {0x0a, 0x05, 'a'}} {
		if n := resourceName(b); n != "" {
			t.Errorf("resourceName(%x) = %q, want empty", b, n)
		}
	}
}

func TestDiffSorted(t *testing.T) {
	added, removed := diffSorted([]string{"a", "c", "d"}, []string{"b", "c", "e"})
	if !slices.Equal(added, []string{"b", "e"}) || !slices.Equal(removed, []string{"a", "d"}) {
		t.Errorf("added %q removed %q", added, removed)
	}
}

func TestNacksSpreadsExactShare(t *testing.T) {
	for _, tc := range []struct {
		n     int
		share float64
		want  int
	}{{20, 0.25, 5}, {20, 0, 0}, {20, 1, 20}, {1000, 0.1, 100}, {7, 0.5, 3}} {
		got := 0
		for i := range tc.n {
			if nacks(i, tc.share) {
				got++
			}
		}
		if got != tc.want {
			t.Errorf("n=%d share=%v: %d proxies NACK, want %d", tc.n, tc.share, got, tc.want)
		}
	}
}

func TestPercentilesOf(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := PercentilesOf(ds)
	want := Percentiles{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
	if (PercentilesOf(nil) != Percentiles{}) {
		t.Error("percentiles of nothing should be zero")
	}
}
