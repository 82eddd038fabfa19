package ca

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// SDSSecret returns the workload's certificate chain and key as the SDS
// secret `default`, inline as istiod sends it (proxies have no file access to
// the CA). Each call returns a new message.
func (w *Workload) SDSSecret() *tlsv3.Secret {
	return &tlsv3.Secret{
		Name: WorkloadSecretName,
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: inlineBytes(w.CertChainPEM),
			PrivateKey:       inlineBytes(w.KeyPEM),
		}},
	}
}

// RootSecret returns the root certificate as the SDS secret `ROOTCA`, the
// validation context proxies check peers' certificates against. Each call
// returns a new message with its own copy of the bytes.
func (ca *CA) RootSecret() *tlsv3.Secret {
	return &tlsv3.Secret{
		Name: RootSecretName,
		Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: inlineBytes(ca.RootPEM()),
		}},
	}
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}
