//! Circuit breaking: Envoy's per-cluster limits on upstream connections,
//! pending requests, active requests and active retries (thresholds of
//! priority DEFAULT; Istio's DestinationRule `connectionPool.tcp.maxConnections`,
//! `http.http1MaxPendingRequests`, `http.http2MaxRequests`, `http.maxRetries`).
//!
//! The counters are keyed by cluster name and live outside the config
//! snapshot, so they survive a push that keeps the cluster (as Envoy's do),
//! while the thresholds are read from the cluster of the current snapshot on
//! every acquire, so a changed limit applies to the next request. Each held
//! resource is a [`Slot`] that gives the count back when dropped: when the
//! response body ends, or when the client goes away mid-request.
//!
//! How this maps onto hyper's pooled client, which opens a connection per
//! in-flight HTTP/1.1 request and multiplexes HTTP/2 over one per endpoint:
//! - every request first takes a `requests` slot (max_requests); over the
//!   limit is an immediate 503 `UO` counted as `upstream_rq_pending_overflow`,
//!   as in Envoy's pool;
//! - an HTTP/1.1 request then takes a `connections` slot (max_connections):
//!   one HTTP/1.1 request in flight is one busy upstream connection. With none
//!   free it counts `upstream_cx_overflow` and waits as *pending* (up to
//!   max_pending_requests, else 503 `UO` and `upstream_rq_pending_overflow`)
//!   until a slot frees or the route timeout ends the wait (504 `UT`). Idle
//!   pooled connections are not counted: the limit bounds connections in use;
//! - HTTP/2 requests take no connection slot (hyper keeps one connection per
//!   endpoint), so max_requests is their bound;
//! - a TCP-proxied connection takes a `connections` slot without waiting;
//! - a retry takes a `retries` slot for as long as it runs (max_retries); with
//!   none free the retry is not attempted, the last response stands, flagged
//!   `UO`, and `upstream_rq_retry_overflow` counts it.

use foldhash::HashMap;
use std::any::Any;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::Notify;

use super::ClusterStat;
use super::upstream::ProxyBody;
use crate::state::CircuitBreakers as Thresholds;

/// The counters of one cluster.
#[derive(Default)]
pub(crate) struct ClusterCircuit {
    connections: AtomicU32,
    pending: AtomicU32,
    requests: AtomicU32,
    retries: AtomicU32,
    /// Wakes pending requests when a connection slot frees.
    freed: Notify,
    cx_overflow: AtomicU64,
    rq_pending_overflow: AtomicU64,
    retry_overflow: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    Connections,
    Pending,
    Requests,
    Retries,
}

/// One held unit of a limited resource; released on drop.
pub struct Slot {
    circuit: Arc<ClusterCircuit>,
    resource: Resource,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slot({:?})", self.resource)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.circuit.counter(self.resource).fetch_sub(1, Ordering::AcqRel);
        if self.resource == Resource::Connections {
            self.circuit.freed.notify_waiters();
        }
    }
}

/// The circuit state of every cluster used so far.
#[derive(Default)]
pub struct CircuitBreakers {
    clusters: RwLock<HashMap<String, Arc<ClusterCircuit>>>,
}

impl CircuitBreakers {
    pub(crate) fn cluster(&self, name: &str) -> Arc<ClusterCircuit> {
        if let Some(c) = self.clusters.read().ok().and_then(|m| m.get(name).cloned()) {
            return c;
        }
        match self.clusters.write() {
            Ok(mut m) => m.entry(name.to_string()).or_default().clone(),
            // A poisoned lock only loses counters; serve with fresh ones.
            Err(_) => Arc::default(),
        }
    }

    /// A TCP-proxied connection's slot; None when the cluster is at
    /// max_connections (close the downstream connection, flag `UO`).
    pub fn tcp_connection(&self, cluster: &crate::state::Cluster) -> Option<Slot> {
        self.cluster(&cluster.name).connection(&cluster.circuit_breakers)
    }

    /// Envoy's stat names and values, cluster by cluster, sorted.
    pub fn stats(&self) -> Vec<ClusterStat> {
        let mut out = Vec::new();
        let Ok(m) = self.clusters.read() else { return out };
        for (name, c) in m.iter() {
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            let gauge = |a: &AtomicU32| u64::from(a.load(Ordering::Relaxed));
            for (stat, value) in [
                ("upstream_cx_overflow", load(&c.cx_overflow)),
                ("upstream_rq_pending_overflow", load(&c.rq_pending_overflow)),
                ("upstream_rq_retry_overflow", load(&c.retry_overflow)),
                ("upstream_rq_active", gauge(&c.requests)),
                ("upstream_rq_pending_active", gauge(&c.pending)),
            ] {
                out.push(ClusterStat { cluster: name.clone(), stat, value });
            }
        }
        out.sort();
        out
    }
}

/// Increments `counter` unless it is at `max`.
fn try_inc(counter: &AtomicU32, max: u32) -> bool {
    counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).is_ok()
}

impl ClusterCircuit {
    fn counter(&self, r: Resource) -> &AtomicU32 {
        match r {
            Resource::Connections => &self.connections,
            Resource::Pending => &self.pending,
            Resource::Requests => &self.requests,
            Resource::Retries => &self.retries,
        }
    }

    fn try_slot(self: &Arc<Self>, resource: Resource, max: u32) -> Option<Slot> {
        try_inc(self.counter(resource), max).then(|| Slot { circuit: self.clone(), resource })
    }

    /// An active request; None is an overflow (503 `UO`).
    pub fn request(self: &Arc<Self>, t: &Thresholds) -> Option<Slot> {
        let slot = self.try_slot(Resource::Requests, t.max_requests);
        if slot.is_none() {
            self.rq_pending_overflow.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    /// A connection without waiting (TCP proxying); None is an overflow.
    pub fn connection(self: &Arc<Self>, t: &Thresholds) -> Option<Slot> {
        let slot = self.try_slot(Resource::Connections, t.max_connections);
        if slot.is_none() {
            self.cx_overflow.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }

    /// A connection for an HTTP/1.1 request, waiting as a pending request
    /// when none is free; None when the pending queue is full too. Dropping
    /// the future (route timeout, client gone) leaves the queue.
    pub async fn connection_or_wait(self: &Arc<Self>, t: &Thresholds) -> Option<Slot> {
        if let Some(s) = self.connection(t) {
            return Some(s);
        }
        let Some(_pending) = self.try_slot(Resource::Pending, t.max_pending_requests) else {
            self.rq_pending_overflow.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        loop {
            let notified = self.freed.notified();
            tokio::pin!(notified);
            // Registered before the check, so a release between the two wakes us.
            notified.as_mut().enable();
            if let Some(s) = self.try_slot(Resource::Connections, t.max_connections) {
                return Some(s);
            }
            notified.await;
        }
    }

    /// A retry; None means the retry is not attempted.
    pub fn retry(self: &Arc<Self>, t: &Thresholds) -> Option<Slot> {
        let slot = self.try_slot(Resource::Retries, t.max_retries);
        if slot.is_none() {
            self.retry_overflow.fetch_add(1, Ordering::Relaxed);
        }
        slot
    }
}

/// A response body that holds a request's slots (and its pick) until it
/// ends, fails or is dropped: an HTTP/1.1 connection is busy until then.
pub(crate) struct Guarded {
    inner: ProxyBody,
    held: Option<Box<dyn Any + Send + Sync>>,
}

impl Guarded {
    pub fn boxed(inner: ProxyBody, held: Box<dyn Any + Send + Sync>) -> ProxyBody {
        Guarded { inner, held: Some(held) }.boxed()
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            this.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(connections: u32, pending: u32, requests: u32, retries: u32) -> Thresholds {
        Thresholds {
            max_connections: connections,
            max_pending_requests: pending,
            max_requests: requests,
            max_retries: retries,
        }
    }

    fn stat(cbs: &CircuitBreakers, name: &str) -> u64 {
        cbs.stats().into_iter().find(|s| s.name() == name).map_or(u64::MAX, |s| s.value)
    }

    #[test]
    fn requests_and_retries_overflow_at_their_limits_and_free_on_drop() {
        let cbs = CircuitBreakers::default();
        let c = cbs.cluster("c");
        let t = limits(10, 10, 2, 1);
        let (a, b) = (c.request(&t), c.request(&t));
        assert!(a.is_some() && b.is_some());
        assert!(c.request(&t).is_none());
        drop(a);
        assert!(c.request(&t).is_some());
        let r = c.retry(&t);
        assert!(r.is_some());
        assert!(c.retry(&t).is_none());
        assert!(c.retry(&limits(1, 1, 1, 0)).is_none(), "max_retries 0 never retries");
        assert_eq!(stat(&cbs, "cluster.c.upstream_rq_pending_overflow"), 1);
        assert_eq!(stat(&cbs, "cluster.c.upstream_rq_retry_overflow"), 2);
    }

    #[test]
    fn a_changed_threshold_applies_to_the_next_acquire() {
        let cbs = CircuitBreakers::default();
        let c = cbs.cluster("c");
        let held = c.connection(&limits(1, 0, 1, 0));
        assert!(held.is_some());
        assert!(c.connection(&limits(1, 0, 1, 0)).is_none());
        assert!(c.connection(&limits(2, 0, 1, 0)).is_some(), "a raised limit admits at once");
        // Same name, same counters (a config push keeps them).
        assert!(cbs.cluster("c").connection(&limits(1, 0, 1, 0)).is_none());
        assert_eq!(stat(&cbs, "cluster.c.upstream_cx_overflow"), 2);
    }

    #[tokio::test]
    async fn pending_requests_wait_for_a_connection_and_overflow_when_the_queue_is_full() {
        let cbs = CircuitBreakers::default();
        let c = cbs.cluster("c");
        let t = limits(1, 1, 100, 0);
        let first = c.connection_or_wait(&t).await.expect("free connection");
        let waiter = tokio::spawn({
            let (c, t) = (c.clone(), t.clone());
            async move { c.connection_or_wait(&t).await.is_some() }
        });
        tokio::task::yield_now().await;
        assert_eq!(c.pending.load(Ordering::Relaxed), 1);
        assert!(c.connection_or_wait(&t).await.is_none(), "queue of one is full");
        drop(first);
        assert!(waiter.await.unwrap(), "the pending request got the freed connection");
        assert_eq!(c.pending.load(Ordering::Relaxed), 0);
        assert_eq!(stat(&cbs, "cluster.c.upstream_rq_pending_overflow"), 1);
    }

    #[tokio::test]
    async fn a_pending_request_that_times_out_leaves_the_queue() {
        let cbs = CircuitBreakers::default();
        let c = cbs.cluster("c");
        let t = limits(1, 1, 100, 0);
        let _busy = c.connection_or_wait(&t).await;
        let waited = tokio::time::timeout(Duration::from_millis(20), c.connection_or_wait(&t)).await;
        assert!(waited.is_err());
        assert_eq!(c.pending.load(Ordering::Relaxed), 0);
        assert_eq!(c.connections.load(Ordering::Relaxed), 1);
    }
}
