//! HTTP/1.1 connections to one cluster's endpoints, kept by one worker: a
//! request takes an idle connection to its endpoint (or makes one through the
//! cluster's [`MeshConnector`]), and its response body gives it back when the
//! body has been read to the end.
//!
//! Why not hyper-util's pooled client, which the HTTP/2 side still uses: for
//! each HTTP/1.1 request it spawns a task that waits for the connection to be
//! ready again and puts it back, hashes the pool key with SipHash under a
//! lock, and moves the response through a channel; replacing it cut the
//! proxy's own instructions per request by an eighth (callgrind). Here,
//! within one worker, a request costs a lock and a `Vec` pop, and the
//! connection's own task is the only one besides the request's.
//!
//! An upstream that closes an idle connection is noticed when the connection
//! is next taken (hyper's dispatcher has seen the EOF by then); a request
//! that hyper could not even start writing on a reused connection is sent
//! again on a new one, as Envoy does for a connection that closed while idle.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use foldhash::HashMap;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1;
use hyper::http::uri::{Authority, Scheme};
use hyper::{Request, Response, Uri};
use tower_service::Service;

use super::connector::{MeshConnector, UpstreamPeer};
use super::upstream::ProxyBody;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A connection left idle in the pool this long (and at most twice this) is
/// closed; hyper-util's pool default.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// Why a request got no response from the upstream.
#[derive(Debug)]
pub enum SendError {
    /// No connection: refused, unreachable, timed out, or the TLS handshake failed.
    Connect(BoxError),
    /// The upstream closed or reset the connection before a response head.
    Reset(BoxError),
    /// The upstream's response was not HTTP.
    Protocol(BoxError),
}

impl SendError {
    pub(crate) fn from_hyper(e: hyper::Error) -> SendError {
        if not_http(&e) { SendError::Protocol(e.into()) } else { SendError::Reset(e.into()) }
    }
}

/// Whether hyper failed because the upstream's answer was not HTTP (a 502),
/// rather than because the upstream went away (a 503).
pub(crate) fn not_http(e: &hyper::Error) -> bool {
    e.is_parse() || e.is_parse_status()
}

/// One worker's HTTP/1.1 connections to one cluster, by endpoint.
pub(crate) struct Http1Pool {
    connector: MeshConnector,
    idle: Mutex<HashMap<Authority, Vec<Pooled>>>,
}

/// A connection and what the pool knows of it.
struct Pooled {
    sender: http1::SendRequest<ProxyBody>,
    /// The server's identity when the connection is mTLS.
    peer: Option<UpstreamPeer>,
    usage: Arc<Usage>,
}

impl Drop for Pooled {
    // Abandoned with its response half-read (or closed): no longer in use, so
    // its task closes it after POOL_IDLE even if hyper would keep reading.
    fn drop(&mut self) {
        self.usage.in_use.store(false, Ordering::Relaxed);
    }
}

/// Whether a connection is in use, and how often it was taken: its task
/// closes it when a whole [`POOL_IDLE`] has passed without either.
#[derive(Default)]
struct Usage {
    in_use: AtomicBool,
    taken: AtomicU64,
}

impl Usage {
    fn take(&self) {
        self.in_use.store(true, Ordering::Relaxed);
        self.taken.fetch_add(1, Ordering::Relaxed);
    }

    async fn idle(&self) {
        loop {
            let seen = self.taken.load(Ordering::Relaxed);
            tokio::time::sleep(POOL_IDLE).await;
            if !self.in_use.load(Ordering::Relaxed) && self.taken.load(Ordering::Relaxed) == seen {
                return;
            }
        }
    }
}

impl Http1Pool {
    pub(crate) fn new(connector: MeshConnector) -> Http1Pool {
        Http1Pool { connector, idle: Mutex::default() }
    }

    /// Sends `req` (absolute-form: the URI's authority is the endpoint) to its
    /// endpoint on a pooled connection, origin-form on the wire.
    pub(crate) async fn send(self: &Arc<Self>, req: Request<ProxyBody>) -> Result<Response<ProxyBody>, SendError> {
        let (mut parts, body) = req.into_parts();
        let Some(endpoint) = parts.uri.authority().cloned() else {
            return Err(SendError::Connect("request without an endpoint".into()));
        };
        parts.uri = origin_form(&parts.uri);
        let mut req = Request::from_parts(parts, body);
        loop {
            let (mut conn, reused) = match self.take(&endpoint).await {
                Some(c) => (c, true),
                None => (self.connect(&endpoint).await?, false),
            };
            conn.usage.take();
            match conn.sender.try_send_request(req).await {
                Ok(resp) => {
                    let (mut parts, body) = resp.into_parts();
                    if let Some(peer) = &conn.peer {
                        parts.extensions.insert(peer.clone());
                    }
                    let back = Some(GiveBack { pool: self.clone(), endpoint, conn });
                    let body = PooledBody { body, ended: false, back };
                    return Ok(Response::from_parts(parts, ProxyBody::new(body)));
                }
                Err(mut e) => match e.take_message() {
                    // Not written at all on a connection that had closed while idle: again, on another.
                    Some(unsent) if reused => req = unsent,
                    _ => return Err(SendError::from_hyper(e.into_error())),
                },
            }
        }
    }

    /// The most recently used idle connection to `endpoint` that is still open.
    async fn take(&self, endpoint: &Authority) -> Option<Pooled> {
        loop {
            let mut conn = self.idle.lock().ok()?.get_mut(endpoint)?.pop()?;
            if conn.sender.is_closed() {
                continue;
            }
            // Given back as its response ended; hyper's dispatcher may not have
            // turned to the next request yet: ready() waits for it (or fails if closed).
            if conn.sender.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    fn put(&self, endpoint: Authority, conn: Pooled) {
        if conn.sender.is_closed() {
            return;
        }
        conn.usage.in_use.store(false, Ordering::Relaxed);
        if let Ok(mut idle) = self.idle.lock() {
            let list = idle.entry(endpoint).or_default();
            list.retain(|c| !c.sender.is_closed());
            list.push(conn);
        }
    }

    async fn connect(&self, endpoint: &Authority) -> Result<Pooled, SendError> {
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(endpoint.clone())
            .path_and_query("/")
            .build()
            .map_err(|e| SendError::Connect(e.into()))?;
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx)).await.map_err(SendError::Connect)?;
        let stream = connector.call(uri).await.map_err(SendError::Connect)?;
        let peer = stream.peer();
        let (sender, connection) = http1::handshake(stream).await.map_err(SendError::from_hyper)?;
        let usage = Arc::new(Usage::default());
        let watched = usage.clone();
        tokio::spawn(async move {
            tokio::select! {
                ended = connection => if let Err(e) = ended {
                    tracing::debug!(error = %e, "upstream connection ended with an error");
                },
                _ = watched.idle() => {}
            }
        });
        Ok(Pooled { sender, peer, usage })
    }
}

/// `/path?query` of an absolute URI.
fn origin_form(uri: &Uri) -> Uri {
    match uri.path_and_query() {
        Some(pq) => Uri::from(pq.clone()),
        None => Uri::from_static("/"),
    }
}

/// Returns the connection to the pool once its response has been read.
struct GiveBack {
    pool: Arc<Http1Pool>,
    endpoint: Authority,
    conn: Pooled,
}

/// A response body that gives its connection back when it has been read to
/// the end, and drops it (closing the connection) when abandoned before.
struct PooledBody {
    body: Incoming,
    ended: bool,
    back: Option<GiveBack>,
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.ended = true;
        }
        polled
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // hyper's server stops polling a body whose length is used up, so
        // the last poll that returns None may never come; is_end_stream
        // says the body was all read.
        if (self.ended || self.body.is_end_stream())
            && let Some(back) = self.back.take()
        {
            back.pool.put(back.endpoint, back.conn);
        }
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "connect: {e}"),
            SendError::Reset(e) | SendError::Protocol(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SendError {}
