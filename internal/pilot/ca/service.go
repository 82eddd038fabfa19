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
)

// ImpersonatedIdentityKey is the key in a request's metadata (the request's
// own Struct, not gRPC headers: where ztunnel puts it and istiod reads it)
// with which a node proxy asks for the identity of a pod it serves rather
// than its own.
const ImpersonatedIdentityKey = "ImpersonatedIdentity"

// CertificateService is istiod's certificate API,
// istio.v1.auth.IstioCertificateService, which node proxies (ztunnel) call
// for the certificates of the workloads they serve. It authenticates no
// caller: whoever reaches it may ask for any identity of the trust domain,
// as with istiod without token authentication. Serve it on the TLS port only.
type CertificateService struct {
	pb.UnimplementedIstioCertificateServiceServer
	ca  *CA
	log *slog.Logger
}

// NewCertificateService serves ca's signing; log receives one line per
// refused or failed request (nil discards).
func NewCertificateService(ca *CA, log *slog.Logger) *CertificateService {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &CertificateService{ca: ca, log: log}
}

// Register adds the service to g.
func (s *CertificateService) Register(g grpc.ServiceRegistrar) {
	pb.RegisterIstioCertificateServiceServer(g, s)
}

// CreateCertificate signs the request's CSR for the impersonated identity
// when the metadata names one, else for the CSR's SPIFFE URI SAN, and returns
// [leaf, root] (ztunnel takes the last certificate as the root).
func (s *CertificateService) CreateCertificate(ctx context.Context, req *pb.IstioCertificateRequest) (*pb.IstioCertificateResponse, error) {
	signed, err := s.create(req)
	if err != nil {
		code := codes.Internal
		if errors.Is(err, ErrInvalidRequest) {
			code = codes.InvalidArgument
		}
		s.log.Warn("certificate request refused", "error", err)
		return nil, status.Error(code, err.Error())
	}
	s.log.Debug("certificate signed", "identity", signed.SPIFFEID, "notAfter", signed.NotAfter)
	return &pb.IstioCertificateResponse{CertChain: []string{string(signed.CertPEM), string(s.ca.rootPEM)}}, nil
}

func (s *CertificateService) create(req *pb.IstioCertificateRequest) (*Signed, error) {
	csr, err := ParseCSR([]byte(req.GetCsr()))
	if err != nil {
		return nil, err
	}
	var spiffeID string
	if v, ok := req.GetMetadata().GetFields()[ImpersonatedIdentityKey]; ok {
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
	secs := req.GetValidityDuration()
	if secs > int64(MaxWorkloadCertTTL/time.Second) { // before it can overflow a Duration
		return nil, invalid("requested lifetime %ds is more than the maximum %v (MAX_WORKLOAD_CERT_TTL)", secs, MaxWorkloadCertTTL)
	}
	return s.ca.SignCSR(csr, id, time.Duration(secs)*time.Second)
}
