package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	pb "istio.io/api/security/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/testutil"
)

const secretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

// On the lab's network every pod reaches pilot, so what makes the mTLS
// checks' "from the client's identity" mean the client pod is that no pod
// can get another's identity: with the client pod's own token the CA
// refuses it the server's identity, directly or by impersonation, and a
// stream claiming the server's identity gets no key over plaintext xDS,
// with or without that token.
func TestPodCannotTakeAnotherPodsIdentity(t *testing.T) {
	l, _ := reliabilityLab(t, 2*time.Second)
	token, err := os.ReadFile(filepath.Join(l.secretsDir, ClientPod, podTokenPath))
	if err != nil {
		t.Fatal(err)
	}
	clientToken := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+string(token))
	server := ca.Identity{Namespace: Namespace, ServiceAccount: ServerSA}.SPIFFEID(trustDomain)
	client := ca.Identity{Namespace: Namespace, ServiceAccount: ClientSA}.SPIFFEID(trustDomain)

	root, err := os.ReadFile(l.pilot.RootCertPath())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	cc, err := grpc.NewClient(l.pilot.Addrs.SecureGRPC,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: altXDSHostname})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	certs := pb.NewIstioCertificateServiceClient(cc)
	impersonate := &structpb.Struct{Fields: map[string]*structpb.Value{ca.ImpersonatedIdentityKey: structpb.NewStringValue(server)}}
	for _, c := range []struct {
		name string
		ctx  context.Context
		req  *pb.IstioCertificateRequest
		want codes.Code
	}{
		{"the server's identity with the client's token", clientToken, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, server)}, codes.PermissionDenied},
		{"impersonating the server with the client's token", clientToken, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, client), Metadata: impersonate}, codes.PermissionDenied},
		{"the server's identity with no token", context.Background(), &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, server)}, codes.Unauthenticated},
		{"its own identity", clientToken, &pb.IstioCertificateRequest{Csr: testutil.SPIFFECSR(t, client)}, codes.OK},
	} {
		if _, err := certs.CreateCertificate(c.ctx, c.req); status.Code(err) != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}

	// Over plaintext xDS, as the server pod's sidecar would register.
	serverNode := &corev3.Node{Id: "sidecar~" + l.server.IP().String() + "~" + ServerPod + "." + Namespace + "~" + Namespace + ".svc.cluster.local"}
	if serverNode.Metadata, err = structpb.NewStruct(map[string]any{"NAMESPACE": Namespace, "SERVICE_ACCOUNT": ServerSA}); err != nil {
		t.Fatal(err)
	}
	plain, err := grpc.NewClient(l.pilot.Addrs.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(plain)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	anonymous, err := ads.StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := anonymous.Send(&discoveryv3.DiscoveryRequest{Node: serverNode, TypeUrl: secretType, ResourceNames: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := anonymous.Recv(); err != nil || len(r.GetResources()) != 0 {
		t.Errorf("SDS for the server's identity without a token: %d secrets, %v; want an empty answer", len(r.GetResources()), err)
	}
	claiming, err := ads.StreamAggregatedResources(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+string(token)))
	if err != nil {
		t.Fatal(err)
	}
	if err := claiming.Send(&discoveryv3.DiscoveryRequest{Node: serverNode, TypeUrl: secretType, ResourceNames: []string{"default"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := claiming.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a stream claiming the server's identity with the client's token: %v, want PermissionDenied", err)
	}
}
