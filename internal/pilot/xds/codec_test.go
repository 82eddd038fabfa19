package xds

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testutil"
)

// testBodies returns n cluster Bodies of about size bytes each.
func testBodies(t testing.TB, n, size int) []*anypb.Any {
	t.Helper()
	out := make([]*anypb.Any, n)
	for i := range out {
		name := fmt.Sprintf("outbound|80||svc-%d.ns.svc.cluster.local", i)
		body, err := anypb.New(&cluster.Cluster{Name: name, AltStatName: strings.Repeat("x", max(size-len(name), 0))})
		if err != nil {
			t.Fatal(err)
		}
		out[i] = body
	}
	return out
}

func sotwResponse(bodies []*anypb.Any, nonce string) *discovery.DiscoveryResponse {
	return &discovery.DiscoveryResponse{
		VersionInfo: "2025-01-01T00:00:00Z/7", Resources: bodies, TypeUrl: ClusterType, Nonce: nonce,
		ControlPlane: &core.ControlPlane{Identifier: "meshperf"},
	}
}

func deltaResponse(bodies []*anypb.Any, nonce string) *discovery.DeltaDiscoveryResponse {
	resp := &discovery.DeltaDiscoveryResponse{
		SystemVersionInfo: "2025-01-01T00:00:00Z/8", TypeUrl: ClusterType, Nonce: nonce,
		RemovedResources: []string{"gone-a", "gone-b"}, ControlPlane: &core.ControlPlane{Identifier: "meshperf"},
	}
	for i, b := range bodies {
		resp.Resources = append(resp.Resources, &discovery.Resource{Name: fmt.Sprintf("r%d", i), Version: "v" + fmt.Sprint(i), Resource: b})
	}
	return resp
}

// The shared layout must put on the wire exactly the bytes the proto codec
// would, so that no proxy can tell the difference: same bytes, same message.
func TestSharedCodecEncodesLikeProto(t *testing.T) {
	c := newSharedCodec(&resourceCache{})
	cases := []struct {
		name     string
		n, size  int
		wantMany bool // the shared layout applies (more than one buffer)
	}{
		{"none", 0, 0, false},
		{"one", 1, 300, true},
		{"many", 200, 4 << 10, true},
		{"over 16 KiB each", 3, 40 << 10, true},
	}
	for _, tc := range cases {
		bodies := testBodies(t, tc.n, tc.size)
		sotwWithTTL := deltaResponse(bodies, "n-3")
		if tc.n > 0 {
			// A field the delta layout does not know: that entry is encoded whole.
			sotwWithTTL.Resources[0].Ttl = durationpb.New(time.Minute)
		}
		for _, m := range []proto.Message{sotwResponse(bodies, "n-1"), deltaResponse(bodies, "n-2"), sotwWithTTL} {
			t.Run(fmt.Sprintf("%s/%T", tc.name, m), func(t *testing.T) {
				out, err := c.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				want, err := proto.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				got := out.Materialize()
				if !bytes.Equal(got, want) {
					t.Fatalf("encoded %d bytes differ from proto.Marshal's %d", len(got), len(want))
				}
				decoded := m.ProtoReflect().New().Interface()
				if err := proto.Unmarshal(got, decoded); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(decoded, m) {
					t.Errorf("decodes to %v, want %v", decoded, m)
				}
				if many := len(out) > 1; many != tc.wantMany {
					t.Errorf("%d buffers: shared layout used = %v, want %v", len(out), many, tc.wantMany)
				}
			})
		}
	}
}

// Two sends of the same Bodies, as to two proxies of one Sidecar scope, must
// reference the same resource bytes rather than copies.
func TestSharedCodecSharesBodyBytes(t *testing.T) {
	cache := &resourceCache{}
	c := newSharedCodec(cache)
	bodies := testBodies(t, 5, 20<<10)
	a, err := c.Marshal(sotwResponse(bodies, "nonce-for-proxy-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Marshal(sotwResponse(bodies, "nonce-for-proxy-b"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Marshal(deltaResponse(bodies, "nonce-for-proxy-d"))
	if err != nil {
		t.Fatal(err)
	}
	// SotW: [header][entry head, value]...[trailer]; delta adds the entry's
	// version before and name after: [header][wrap, head, value, name]...[trailer].
	if len(a) != 2*len(bodies)+2 || len(b) != len(a) || len(d) != 4*len(bodies)+2 {
		t.Fatalf("got %d, %d and %d buffers for %d resources", len(a), len(b), len(d), len(bodies))
	}
	for i, body := range bodies {
		x, y, z := a[2+2*i].ReadOnlyData(), b[2+2*i].ReadOnlyData(), d[3+4*i].ReadOnlyData()
		if &x[0] != &body.Value[0] {
			t.Errorf("resource %d: the first send copied the Body's value", i)
		}
		if &y[0] != &x[0] || &z[0] != &x[0] {
			t.Errorf("resource %d: the sends hold different copies", i)
		}
		if &a[1+2*i].ReadOnlyData()[0] != &b[1+2*i].ReadOnlyData()[0] {
			t.Errorf("resource %d: the entry heads were encoded twice", i)
		}
		for _, buf := range []mem.Buffer{a[1+2*i], a[2+2*i]} {
			if _, ok := buf.(mem.SliceBuffer); !ok {
				t.Errorf("resource %d: a %T, which gRPC could recycle into a pool", i, buf)
			}
		}
	}
	if got := cache.size.Load(); got != int64(len(bodies)) {
		t.Errorf("cache holds %d entries, want %d", got, len(bodies))
	}
	if x, y := a[len(a)-1].ReadOnlyData(), b[len(b)-1].ReadOnlyData(); bytes.Equal(x, y) {
		t.Error("the per-send trailer is the same for both sends; their nonces differ")
	}
	runtime.KeepAlive(bodies)
}

// A Body's entry must go once the Body is garbage: the cache must not keep
// every snapshot's encodings alive.
func TestResourceCacheForgetsCollectedBodies(t *testing.T) {
	cache := &resourceCache{}
	c := newSharedCodec(cache)
	func() {
		if _, err := c.Marshal(sotwResponse(testBodies(t, 10, 1<<10), "n")); err != nil {
			t.Fatal(err)
		}
	}()
	if got := cache.size.Load(); got != 10 {
		t.Fatalf("cache holds %d entries, want 10", got)
	}
	// A collection queues the entries' cleanups; they run on their own
	// goroutine afterwards, so collect until they have run.
	testutil.Eventually(t, 10*time.Second, func() error {
		runtime.GC()
		if got := cache.size.Load(); got != 0 {
			return fmt.Errorf("cache holds %d entries after their Bodies were collected", got)
		}
		return nil
	})
}

// The same Body under another name (or version) must still encode correctly:
// the cached delta pieces are reused only when both match.
func TestSharedCodecDeltaNameChange(t *testing.T) {
	c := newSharedCodec(&resourceCache{})
	body := testBodies(t, 1, 100)[0]
	for _, r := range []*discovery.Resource{
		{Name: "a", Version: "1", Resource: body},
		{Name: "b", Version: "1", Resource: body},
		{Name: "b", Version: "", Resource: body},
		{Name: "", Version: "2", Resource: body},
		{Name: "a", Version: "1", Resource: body},
	} {
		m := &discovery.DeltaDiscoveryResponse{Resources: []*discovery.Resource{r}, Nonce: "n"}
		out, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := proto.Marshal(m); !bytes.Equal(out.Materialize(), want) {
			t.Errorf("name %q version %q: bytes differ from proto.Marshal", r.Name, r.Version)
		}
	}
}

// Anything but a discovery response, and requests in, go through gRPC's
// proto codec unchanged: the option applies to the whole grpc.Server.
func TestSharedCodecOtherMessages(t *testing.T) {
	c := newSharedCodec(&resourceCache{})
	req := &discovery.DiscoveryRequest{TypeUrl: ClusterType, ResourceNames: []string{"a", "b"}, ResponseNonce: "n"}
	out, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(req); !bytes.Equal(out.Materialize(), want) {
		t.Error("a request encodes differently from proto.Marshal")
	}
	var back discovery.DiscoveryRequest
	if err := c.Unmarshal(out, &back); err != nil || !proto.Equal(&back, req) {
		t.Errorf("Unmarshal: %v, %v", &back, err)
	}
	if _, err := c.Marshal(struct{}{}); err == nil {
		t.Error("a non-proto value encoded without error")
	}
	// A nil resource is left to the proto codec, which rejects it as before.
	_, err = c.Marshal(&discovery.DiscoveryResponse{Resources: []*anypb.Any{nil}})
	_, wantErr := grpcProtoMarshal(&discovery.DiscoveryResponse{Resources: []*anypb.Any{nil}})
	if (err == nil) != (wantErr == nil) {
		t.Errorf("nil resource: error %v, the proto codec's %v", err, wantErr)
	}
}

func grpcProtoMarshal(m proto.Message) (mem.BufferSlice, error) {
	return newSharedCodec(&resourceCache{}).proto.Marshal(m)
}

// Two proxies served the same Bodies over real streams: the server encodes
// each Body once, not once per proxy.
func TestTwoConnectionsShareEncodings(t *testing.T) {
	res := make(Resources, 0, 4)
	for i, b := range testBodies(t, 4, 2<<10) {
		res = append(res, Resource{Name: fmt.Sprint("c", i), Body: b})
	}
	e := newTestEnv(t, sharedGen{res: res}, Options{})
	ctx := testCtx(t)
	for range 2 {
		c := e.sotw(t, ctx, testNode(t, "1.22.0"))
		c.ask(ClusterType)
		got := c.expect(ClusterType)
		if len(got.Resources) != len(res) || !proto.Equal(got.Resources[3], res[3].Body) {
			t.Fatalf("received %d resources, want the generator's %d", len(got.Resources), len(res))
		}
	}
	if n := e.srv.cache.size.Load(); n != int64(len(res)) {
		t.Errorf("the server encoded %d entries for two proxies of %d shared Bodies", n, len(res))
	}
}

// A grpc.Server built without ServerOption serves the same responses through
// gRPC's own codec.
func TestServesWithoutSharedCodec(t *testing.T) {
	e := newTestEnvCodec(t, newFakeGen("a", "b"), Options{}, false)
	ctx := testCtx(t)
	c := e.sotw(t, ctx, testNode(t, "1.22.0"))
	c.ask(ClusterType)
	if clusters := decode[cluster.Cluster](t, c.expect(ClusterType).Resources); len(clusters) != 2 {
		t.Errorf("got %d clusters, want 2", len(clusters))
	}
	if n := e.srv.cache.size.Load(); n != 0 {
		t.Errorf("%d encodings cached without the codec", n)
	}
}

// Anys the shared layout does not lay out itself (empty parts, unknown fields)
// still encode exactly as proto.Marshal does, and one proto.Marshal rejects
// is rejected.
func TestSharedCodecUnusualBodies(t *testing.T) {
	c := newSharedCodec(&resourceCache{})
	withUnknown := &anypb.Any{TypeUrl: ClusterType, Value: []byte{0x0a, 0x01, 'a'}}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 9, protowire.BytesType), "extra"))
	bodies := []*anypb.Any{{}, {TypeUrl: ClusterType}, {Value: []byte{1, 2, 3}}, withUnknown}
	for _, m := range []proto.Message{sotwResponse(bodies, "n"), deltaResponse(bodies, "n")} {
		out, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := proto.Marshal(m); !bytes.Equal(out.Materialize(), want) {
			t.Errorf("%T: bytes differ from proto.Marshal", m)
		}
	}
	bad := sotwResponse([]*anypb.Any{{TypeUrl: "type.googleapis.com/\xff"}}, "n")
	if _, err := c.Marshal(bad); err == nil {
		t.Error("a type URL that is not UTF-8 encoded without error")
	}
}

// Names two proxies subscribe to are held once, not once per watch.
func TestSubscribedNamesAreInterned(t *testing.T) {
	name := "outbound|80||reviews.bookinfo.svc.cluster.local"
	a := sortedNames([]string{strings.Clone(name), "b"})
	b := sortedNames([]string{"b", strings.Clone(name)})
	if unsafe.StringData(a[1]) != unsafe.StringData(b[1]) || a[1] != name {
		t.Errorf("the same name from two requests is held twice: %q, %q", a[1], b[1])
	}
}
