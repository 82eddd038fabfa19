package ca

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pb "istio.io/api/security/v1alpha1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ImpersonatedIdentityKey is the key in a request's metadata (the request's
// own Struct, not gRPC headers: where ztunnel puts it and istiod reads it)
// with which a node proxy asks for the identity of a pod it serves rather
// than its own.
const ImpersonatedIdentityKey = "ImpersonatedIdentity"

// CertificateService is istiod's certificate API,
// istio.v1.auth.IstioCertificateService, which node proxies (ztunnel) call
// for the certificates of the workloads they serve. Without an
// Authenticator (off Kubernetes) it authenticates no caller: whoever
// reaches it may ask for any identity of the trust domain, as with istiod
// without token authentication. With one (WithAuthenticator, on
// Kubernetes) a caller gets only its own identity, or, from a trusted node
// proxy's service account, the identity it impersonates (with
// WithNodeAuthorizer, only that of a pod on the node proxy's node). Serve
// it on the TLS port only.
type CertificateService struct {
	pb.UnimplementedIstioCertificateServiceServer
	ca           *CA
	log          *slog.Logger
	auth         Authenticator
	nodeAccounts sets.Set[Identity]
	nodes        NodeAuthorizer // nil: node proxies may ask for any identity
}

// ServiceOption configures a CertificateService.
type ServiceOption func(*CertificateService)

// WithAuthenticator makes the service authenticate every caller with a
// and refuse identities other than the caller's own.
func WithAuthenticator(a Authenticator) ServiceOption {
	return func(s *CertificateService) { s.auth = a }
}

// WithTrustedNodeAccounts replaces DefaultTrustedNodeAccounts: the service
// accounts whose callers may impersonate (istiod's CA_TRUSTED_NODE_ACCOUNTS).
func WithTrustedNodeAccounts(ids ...Identity) ServiceOption {
	return func(s *CertificateService) { s.nodeAccounts = sets.New(ids...) }
}

// WithNodeAuthorizer limits the node proxies' impersonation to the
// identities of pods on their own node (on Kubernetes).
func WithNodeAuthorizer(n NodeAuthorizer) ServiceOption {
	return func(s *CertificateService) { s.nodes = n }
}

// NewCertificateService serves ca's signing; log receives one line per
// refused or failed request (nil discards).
func NewCertificateService(ca *CA, log *slog.Logger, opts ...ServiceOption) *CertificateService {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &CertificateService{ca: ca, log: log, nodeAccounts: sets.New(DefaultTrustedNodeAccounts...)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Register adds the service to g.
func (s *CertificateService) Register(g grpc.ServiceRegistrar) {
	pb.RegisterIstioCertificateServiceServer(g, s)
}

// CreateCertificate signs the request's CSR for the impersonated identity
// when the metadata names one, else for the CSR's SPIFFE URI SAN, and returns
// [leaf, root] (ztunnel takes the last certificate as the root).
func (s *CertificateService) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	signed, err := s.create(ctx, req)
	if err != nil {
		code := codes.Internal
		switch {
		case errors.Is(err, ErrInvalidRequest):
			code = codes.InvalidArgument
		case errors.Is(err, ErrUnauthenticated):
			code = codes.Unauthenticated
		case errors.Is(err, ErrPermissionDenied):
			code = codes.PermissionDenied
		}
		s.log.Warn("certificate request refused", "error", err)
		return nil, status.Error(code, err.Error())
	}
	s.log.Debug("certificate signed", "identity", signed.SPIFFEID, "notAfter", signed.NotAfter)
	return &pb.IstioCertificateResponse{CertChain: []string{string(signed.CertPEM), string(s.ca.rootPEM)}}, nil
}

func (s *CertificateService) create(ctx context.Context, req *pb.IstioCertificateRequest) (*Signed, error) {
	// Authenticate first: an anonymous caller learns nothing from how its
	// request would have been refused.
	var caller Caller
	if s.auth != nil {
		var err error
		if caller, err = s.auth.Authenticate(ctx); err != nil {
			return nil, err
		}
	}
	csr, err := ParseCSR([]byte(req.GetCsr()))
	if err != nil {
		return nil, err
	}
	var spiffeID string
	v, impersonating := req.GetMetadata().GetFields()[ImpersonatedIdentityKey]
	if impersonating {
		spiffeID = v.GetStringValue()
	} else {
		if len(csr.URIs) != 1 {
			return nil, invalid("the CSR has %d URI SANs and no %s metadata names the identity: want one SPIFFE ID", len(csr.URIs), ImpersonatedIdentityKey)
		}
		spiffeID = csr.URIs[0].String()
	}
	id, err := s.ca.ParseSPIFFEID(spiffeID)
	if err != nil {
		return nil, err
	}
	if s.auth != nil {
		if err := authorize(caller, id, impersonating, s.nodeAccounts, s.nodes); err != nil {
			return nil, err
		}
	}
	secs := req.GetValidityDuration()
	if secs > int64(MaxWorkloadCertTTL/time.Second) { // before it can overflow a Duration
		return nil, invalid("requested lifetime %ds is more than the maximum %v (MAX_WORKLOAD_CERT_TTL)", secs, MaxWorkloadCertTTL)
	}
	return s.ca.SignCSR(csr, id, time.Duration(secs)*time.Second)
}
