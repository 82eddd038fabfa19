//! One certificate per workload identity a node proxy serves, fetched on
//! first use and renewed in the background.
//!
//! Each identity has a task that asks the CA, publishes the certificate on a
//! watch channel, sleeps until the certificate's half life, and asks again.
//! Callers only read the channel, so concurrent first callers share the one
//! request and a renewal never blocks a connection. A failed renewal keeps
//! the old certificate while it is valid and retries with backoff; a failed
//! first request is the answer to everyone waiting on it, and the next
//! `fetch` starts over. `forget` ends the task (and with it the retries).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{CaClient, CaClientConfig, Error, Identity, WorkloadCertificate};

/// The first retry after a failed renewal; doubled per failure up to
/// [`MAX_RETRY`], and never past the certificate's expiry.
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

/// The certificates of a node proxy's workload identities; one per node proxy.
pub struct SecretManager {
    ca: CaClient,
    certificates: Mutex<HashMap<Identity, Entry>>,
}

#[derive(Clone)]
enum CertState {
    Pending,
    Ready(Arc<WorkloadCertificate>),
    Failed(Error),
}

struct Entry {
    state: watch::Receiver<CertState>,
    /// The fetch-and-renew task; aborted when the entry goes.
    task: JoinHandle<()>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SecretManager {
    /// Reads the CA's root and checks its address; connects on first fetch.
    pub fn new(ca: CaClientConfig) -> Result<SecretManager, Error> {
        Ok(SecretManager { ca: CaClient::new(&ca)?, certificates: Mutex::default() })
    }

    /// The current certificate of `id`: cached, or requested now (one request
    /// however many callers ask at once). Must be called inside a tokio
    /// runtime, which then runs the identity's renewals.
    pub async fn fetch(&self, id: &Identity) -> Result<Arc<WorkloadCertificate>, Error> {
        let mut state = {
            let mut certificates = self.certificates.lock().unwrap_or_else(PoisonError::into_inner);
            match certificates.get(id) {
                Some(entry) if !matches!(*entry.state.borrow(), CertState::Failed(_)) => entry.state.clone(),
                _ => {
                    let (tx, rx) = watch::channel(CertState::Pending);
                    let task = tokio::spawn(keep_certificate(self.ca.clone(), id.clone(), tx));
                    certificates.insert(id.clone(), Entry { state: rx.clone(), task });
                    rx
                }
            }
        };
        let ready =
            state.wait_for(|s| !matches!(s, CertState::Pending)).await.map_err(|_| Error::Forgotten(id.clone()))?;
        match &*ready {
            CertState::Ready(cert) => Ok(Arc::clone(cert)),
            CertState::Failed(e) => Err(e.clone()),
            CertState::Pending => unreachable!("waited for a state other than Pending"),
        }
    }

    /// Drops `id`'s certificate and stops renewing it: call when the last
    /// workload with this identity has gone from the node. Connections made
    /// with it keep it.
    pub fn forget(&self, id: &Identity) {
        self.certificates.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
    }

    /// Keeps `id`'s certificate for good, calling `issued` with the first one
    /// and with each renewal: a sidecar's own certificate. Where `fetch`
    /// gives up on a failed first request, this retries it with backoff
    /// (each refusal logged with the CA's reason by the renewer), so a
    /// sidecar started before its token or the CA is usable gets its
    /// certificate once they are. Returns only when the runtime stops.
    pub async fn follow(&self, id: &Identity, mut issued: impl FnMut(Arc<WorkloadCertificate>)) {
        let mut retry = FIRST_RETRY;
        loop {
            match self.fetch(id).await {
                Ok(cert) => {
                    retry = FIRST_RETRY;
                    issued(Arc::clone(&cert));
                    let state = self
                        .certificates
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(id)
                        .map(|e| e.state.clone());
                    if let Some(mut state) = state {
                        // Until the renewer has a new certificate, or has
                        // given up on this one (expired, renewal refused).
                        let _ = state.wait_for(|s| !matches!(s, CertState::Ready(c) if Arc::ptr_eq(c, &cert))).await;
                    }
                }
                Err(e) => {
                    tracing::info!(%id, "retrying the certificate request in {retry:?} ({e})");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(MAX_RETRY);
                }
            }
        }
    }

    /// The identities that have (or are getting) a certificate.
    pub fn identities(&self) -> Vec<Identity> {
        let certificates = self.certificates.lock().unwrap_or_else(PoisonError::into_inner);
        let mut ids: Vec<Identity> = certificates.keys().cloned().collect();
        ids.sort();
        ids
    }
}

/// Fetches `id`'s certificate, then renews it at each half life, until the
/// entry is dropped (the task aborted) or a first request fails.
async fn keep_certificate(ca: CaClient, id: Identity, state: watch::Sender<CertState>) {
    let mut retry = FIRST_RETRY;
    let mut current: Option<Arc<WorkloadCertificate>> = None;
    loop {
        match ca.sign(&id).await {
            Ok(cert) => {
                let cert = Arc::new(cert);
                tracing::info!(%id, expires = ?cert.not_after(), "workload certificate issued");
                state.send_replace(CertState::Ready(Arc::clone(&cert)));
                retry = FIRST_RETRY;
                let wait = cert.refresh_at().duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
                current = Some(cert);
                tokio::time::sleep(wait).await;
            }
            Err(e) => match current.as_ref().filter(|c| c.not_after() > SystemTime::now()) {
                Some(valid) => {
                    let until_expiry = valid.not_after().duration_since(SystemTime::now()).unwrap_or_default();
                    let wait = retry.min(until_expiry);
                    tracing::warn!(%id, "certificate renewal failed ({e}); keeping the current one, retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    retry = (retry * 2).min(MAX_RETRY);
                }
                None => {
                    tracing::warn!(%id, "no certificate: {e}");
                    state.send_replace(CertState::Failed(e));
                    return;
                }
            },
        }
    }
}
