//! The HTTP side of a filter chain: a hyper server (HTTP/1.1 and h2c on the
//! same connection) whose every request is routed by the chain's route
//! config and handled by the route's action: forward (see `forward`), direct
//! response, or redirect; with the fault filter's delay and abort first.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, LOCATION};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};

use super::body::Observed;
use super::connector::UpstreamPeer;
use super::drain::DrainWatch;
use super::idle::Tracked;
use super::route::{RequestHead, select_route};
use super::upstream::ProxyBody;
use super::{Reporter, RequestInfo, RequestProtocol, SecurityPolicy, Shared};
use crate::state::{Fault, Redirect, Route, RouteAction, RouteConfig};

/// Envoy's default `max_request_headers_kb` is 60; a larger head gets 431.
const MAX_HEADER_BYTES: usize = 60 * 1024;

/// Where a chain's routes come from: RDS (looked up per request, so a push
/// applies to open connections) or inline.
#[derive(Clone)]
pub(crate) enum Routes {
    Rds(String),
    Inline(Arc<RouteConfig>),
}

/// One downstream connection served by an HTTP chain.
pub(crate) struct HttpConn {
    pub shared: Arc<Shared>,
    pub reporter: Reporter,
    pub listener: Arc<str>,
    pub routes: Routes,
    pub fault_filter: bool,
    pub peer: SocketAddr,
    pub original_dst: SocketAddr,
    pub security: SecurityPolicy,
    pub peer_principal: Option<String>,
}

/// Serves the connection until the client closes it or leaves it idle for
/// `idle_timeout`. Protocol errors are answered by hyper (400, 431) and end
/// only this connection. When the drain starts, hyper's graceful shutdown
/// finishes the requests in flight and closes: HTTP/1.1 answers them with
/// `Connection: close` (an idle connection closes at once), HTTP/2 sends
/// GOAWAY.
pub(crate) async fn serve<IO>(conn: Arc<HttpConn>, io: IO, idle_timeout: Option<Duration>, drain: &DrainWatch)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let conn = conn.clone();
        async move { Ok::<_, Infallible>(conn.handle(req).await) }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // No header-read timeout (Envoy has none by default either): hyper's arms
    // a timer per request, which costs a wake-up of the poller each time; a
    // client that stalls is closed by the idle timeout instead (see `idle`).
    builder.http1().max_buf_size(MAX_HEADER_BYTES).header_read_timeout(None);
    builder.http2().timer(TokioTimer::new()).max_header_list_size(MAX_HEADER_BYTES as u32);
    let (io, traffic) = Tracked::new(io);
    let served = builder.serve_connection(TokioIo::new(io), svc);
    let idle = traffic.idle(idle_timeout);
    let draining = drain.draining();
    tokio::pin!(served, idle, draining);
    let mut graceful = false;
    loop {
        tokio::select! {
            // The drain first: a response that completes in the same wake-up
            // as the drain's start then goes out with Connection: close.
            biased;
            _ = draining.as_mut(), if !graceful => {
                served.as_mut().graceful_shutdown();
                graceful = true;
            }
            result = served.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "downstream connection ended with an error");
                }
                return;
            }
            _ = idle.as_mut() => {
                tracing::debug!("downstream connection closed: idle timeout");
                return;
            }
        }
    }
}

/// The outcome of handling a request before it is reported.
pub(crate) struct Handled {
    pub response: Response<ProxyBody>,
    pub cluster: Option<String>,
    pub upstream: Option<SocketAddr>,
    pub flags: &'static str,
}

impl Handled {
    pub fn local(status: StatusCode, body: &'static str, flags: &'static str) -> Handled {
        Handled {
            response: local_reply(status, Bytes::from_static(body.as_bytes())),
            cluster: None,
            upstream: None,
            flags,
        }
    }
}

/// Envoy's gRPC test: HTTP/2 with a content-type of `application/grpc`,
/// alone or with a suffix (`+proto`, `+json`).
fn request_protocol<B>(req: &Request<B>) -> RequestProtocol {
    if req.version() != Version::HTTP_2 {
        return RequestProtocol::Http;
    }
    let grpc =
        req.headers().get(hyper::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc { RequestProtocol::Grpc } else { RequestProtocol::Http2 }
}

pub(crate) fn local_reply(status: StatusCode, body: Bytes) -> Response<ProxyBody> {
    let mut resp = Response::new(Full::new(body).map_err(|never| match never {}).boxed());
    *resp.status_mut() = status;
    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

impl HttpConn {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<ProxyBody> {
        let start = Instant::now();
        let protocol = request_protocol(&req);
        let method = req.method().clone();
        let authority = authority(&req).to_string();
        let request_bytes = Arc::new(AtomicU64::new(0));
        let handled = self.route(req, &request_bytes).await;
        let Some(observer) = self.shared.observer.clone() else { return handled.response };
        // The other side's identity: the client's from this connection's mTLS
        // inbound, the server's from the upstream connection's outbound.
        let upstream_peer = || handled.response.extensions().get::<UpstreamPeer>().and_then(|p| p.0.clone());
        let (peer_principal, upstream_principal) = match self.reporter {
            Reporter::Destination => (self.peer_principal.clone(), None),
            Reporter::Source => (upstream_peer(), None),
            Reporter::Waypoint => (self.peer_principal.clone(), upstream_peer()),
        };
        let info = RequestInfo {
            reporter: self.reporter,
            listener: self.listener.clone(),
            cluster: handled.cluster,
            upstream: handled.upstream,
            downstream_peer: self.peer,
            original_dst: self.original_dst,
            protocol,
            method,
            authority,
            response_code: handled.response.status().as_u16(),
            response_flags: handled.flags.to_string(),
            duration: Duration::ZERO,
            request_bytes: 0,
            response_bytes: 0,
            security_policy: self.security,
            peer_principal,
            upstream_principal,
        };
        let (parts, body) = handled.response.into_parts();
        Response::from_parts(parts, Observed::boxed(body, observer, info, request_bytes, start))
    }

    async fn route(&self, req: Request<Incoming>, request_bytes: &Arc<AtomicU64>) -> Handled {
        let routes = match &self.routes {
            Routes::Inline(rc) => Some(rc.clone()),
            Routes::Rds(name) => self.shared.state.snapshot().routes.get(name).cloned(),
        };
        let Some(routes) = routes else {
            return Handled::local(StatusCode::NOT_FOUND, "", "NR");
        };
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        let head = RequestHead {
            authority: authority(&req),
            path,
            method: req.method(),
            headers: req.headers(),
            scheme: req.uri().scheme_str().unwrap_or("http"),
        };
        let Some(route) = select_route(&routes, &head) else {
            return Handled::local(StatusCode::NOT_FOUND, "", "NR");
        };
        let mut delayed = false;
        if self.fault_filter
            && let Some(fault) = &route.fault
            && let Some(aborted) = apply_fault(fault, &mut delayed).await
        {
            return aborted;
        }
        let mut handled = match &route.action {
            RouteAction::DirectResponse { status, body } => Handled {
                response: local_reply(
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
                    body.clone().map(Bytes::from).unwrap_or_default(),
                ),
                cluster: None,
                upstream: None,
                flags: "",
            },
            RouteAction::Redirect(r) => redirect(r, route, &req),
            RouteAction::Forward(f) => super::forward::forward(self, f, route, req, request_bytes).await,
        };
        if delayed && handled.flags.is_empty() {
            handled.flags = "DI";
        }
        handled
    }
}

/// The request's authority: the URI's (HTTP/2, absolute-form) or the Host header.
pub(crate) fn authority<B>(req: &Request<B>) -> &str {
    req.uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(hyper::header::HOST).and_then(|h| h.to_str().ok()))
        .unwrap_or("")
}

/// Delays and/or aborts as the route's fault says; an abort is the response.
async fn apply_fault(fault: &Fault, delayed: &mut bool) -> Option<Handled> {
    let hit = |per_million: u32| fastrand::u32(0..1_000_000) < per_million;
    if let Some(d) = &fault.delay
        && hit(d.per_million)
    {
        tokio::time::sleep(d.delay).await;
        *delayed = true;
    }
    if let Some(a) = &fault.abort
        && hit(a.per_million)
    {
        let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        return Some(Handled::local(status, "fault filter abort", "FI"));
    }
    None
}

fn redirect<B>(r: &Redirect, route: &Route, req: &Request<B>) -> Handled {
    let scheme = if r.https { "https" } else { r.scheme.as_deref().unwrap_or("http") };
    let auth = authority(req);
    let host = r.host.as_deref().unwrap_or_else(|| auth.split(':').next().unwrap_or(auth));
    let port = r.port.map(|p| format!(":{p}")).unwrap_or_default();
    let (path, query) = match req.uri().path_and_query() {
        Some(pq) => (pq.path(), pq.query()),
        None => ("/", None),
    };
    let mut location = format!("{scheme}://{host}{port}");
    match (&r.path, &r.prefix_rewrite) {
        (Some(p), _) => location.push_str(p),
        (None, Some(p)) => {
            let n = super::route::matched_prefix_len(&route.matcher.path, path).unwrap_or(path.len());
            location.push_str(p);
            location.push_str(path.get(n..).unwrap_or(""));
        }
        (None, None) => location.push_str(path),
    }
    if let (Some(q), false) = (query, r.strip_query) {
        location.push('?');
        location.push_str(q);
    }
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::MOVED_PERMANENTLY);
    let mut response = local_reply(status, Bytes::new());
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, v);
    }
    Handled { response, cluster: None, upstream: None, flags: "" }
}
