//! The committed test certificates (testdata/tls, see its README) as SDS
//! would deliver them.

use std::collections::BTreeMap;
use std::sync::Arc;

use meshperf_proxy::state::{CertificateSecret, Secret, ValidationSecret};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

pub const CART: &str = "spiffe://cluster.local/ns/shop/sa/cart";
pub const CATALOG: &str = "spiffe://cluster.local/ns/shop/sa/catalog";

pub fn pem(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/tls/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `NAME-cert.pem` and `NAME-key.pem`.
pub fn certificate(name: &str) -> CertificateSecret {
    let chain = CertificateDer::pem_slice_iter(&pem(&format!("{name}-cert.pem"))).collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(&pem(&format!("{name}-key.pem"))).unwrap();
    CertificateSecret { chain, key: Arc::new(key) }
}

/// The certificates of `NAME-cert.pem` as trust roots.
pub fn validation(name: &str) -> ValidationSecret {
    let certificates: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem(&format!("{name}-cert.pem"))).collect::<Result<_, _>>().unwrap();
    let mut store = RootCertStore::empty();
    for c in &certificates {
        store.add(c.clone()).unwrap();
    }
    ValidationSecret { roots: Arc::new(store), certificates }
}

/// SDS's two secrets for a workload: its certificate as `default`, the mesh root as `ROOTCA`.
pub fn secrets(workload: &str) -> BTreeMap<String, Arc<Secret>> {
    BTreeMap::from([
        ("default".to_string(), Arc::new(Secret::Certificate(certificate(workload)))),
        ("ROOTCA".to_string(), Arc::new(Secret::Validation(validation("root")))),
    ])
}
