//! Forwarding a routed request: pick the cluster and an endpoint, rewrite the
//! request for the upstream, send it through the cluster's pooled client, and
//! retry as the route's policy says, all within the route's timeout. Each
//! try holds the cluster's circuit-breaker slots (see `circuit`) until its
//! response body ends, and reports its result to outlier detection.
//!
//! Retries need the request body again, so only requests whose body is empty
//! or at most [`MAX_RETRY_BODY`] bytes with a known length are buffered and
//! retried; a larger or streamed body is sent once, streaming.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::{PathAndQuery, Scheme};
use hyper::{Request, Response, StatusCode, Uri, Version};

use super::body::Counted;
use super::circuit::{Guarded, Slot};
use super::http::{Handled, HttpConn};
use super::lb::UpstreamAddr;
use super::pool::SendError;
use super::route::{matched_prefix_len, pick_cluster};
use super::upstream::ProxyBody;
use crate::state::{Forward, RetryOn, RetryPolicy, Route, UpstreamProtocol};

/// Bodies up to this size are buffered so that a retry can resend them.
pub const MAX_RETRY_BODY: u64 = 64 * 1024;

/// Headers that describe one hop's connection and must not be forwarded.
/// Names made once: parsing a name from a string on every request cost more
/// than the lookups themselves.
const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
    header::TRAILER,
];
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// How one try ended.
enum Try {
    Response(Response<ProxyBody>),
    ConnectFailure,
    /// The upstream closed or reset before a response head.
    Reset,
    ProtocolError,
    Timeout,
}

pub(crate) async fn forward(
    conn: &HttpConn,
    fwd: &Forward,
    route: &Route,
    req: Request<Incoming>,
    request_bytes: &Arc<AtomicU64>,
) -> Handled {
    let cluster_name = pick_cluster(&fwd.target).to_string();
    let Some(cluster) = conn.shared.state.snapshot().clusters.get(&cluster_name).cloned() else {
        // Envoy: a route to a cluster it does not know is 503 NC.
        return with_cluster(Handled::local(StatusCode::SERVICE_UNAVAILABLE, "no cluster", "NC"), cluster_name);
    };
    let downstream_h2 = req.version() == Version::HTTP_2;
    let h2 = match cluster.protocol {
        UpstreamProtocol::Http2 => true,
        UpstreamProtocol::Http1 => false,
        UpstreamProtocol::UseDownstream => downstream_h2,
    };
    let (mut parts, body) = req.into_parts();
    prepare_headers(&mut parts.headers, fwd, &parts.uri);
    let path = match upstream_path(fwd, route, &parts.uri) {
        Ok(p) => p,
        Err(_) => return Handled::local(StatusCode::BAD_REQUEST, "bad request path", "DPE"),
    };

    // The body: buffered when it can be resent, streamed (and sent once) when not.
    let replayable = body.is_end_stream() || body.size_hint().exact().is_some_and(|n| n <= MAX_RETRY_BODY);
    let (buffered, mut streamed) = if replayable {
        match body.collect().await {
            Ok(c) => {
                let bytes = c.to_bytes();
                request_bytes.store(bytes.len() as u64, Ordering::Relaxed);
                (Some(bytes), None)
            }
            Err(_) => return Handled::local(StatusCode::BAD_REQUEST, "bad request body", "DPE"),
        }
    } else {
        (None, Some(Counted::boxed(body.boxed(), request_bytes.clone())))
    };
    let retry = fwd.retry.as_ref().filter(|_| replayable);
    let tries = 1 + retry.map_or(0, |r| r.num_retries);
    let client = conn.shared.upstreams.client(&cluster, h2);
    let circuit = conn.shared.circuits.cluster(&cluster.name);
    let limits = &cluster.circuit_breakers;

    let attempts = async {
        let mut last: Option<UpstreamAddr> = None;
        let mut retry_slot: Option<Slot> = None;
        let mut retry_overflow = false;
        for attempt in 0..tries {
            let Some(request_slot) = circuit.request(limits) else { return overflow() };
            // HTTP/1.1: one request in flight is one upstream connection in use.
            let connection_slot = match h2 {
                true => None,
                false => match circuit.connection_or_wait(limits).await {
                    Some(s) => Some(s),
                    None => return overflow(),
                },
            };
            let pick = {
                let snap = conn.shared.state.snapshot();
                conn.shared.lb.pick(&snap, &cluster, conn.original_dst, last.as_ref())
            };
            let Some(pick) = pick else {
                return Handled::local(StatusCode::SERVICE_UNAVAILABLE, "no healthy upstream", "UH");
            };
            let mut target = hyper::http::uri::Parts::default();
            target.scheme = Some(Scheme::HTTP);
            target.authority = pick.authority();
            target.path_and_query = Some(path.clone());
            let uri = match Uri::from_parts(target) {
                Ok(u) => u,
                Err(_) => return Handled::local(StatusCode::BAD_REQUEST, "bad request path", "DPE"),
            };
            let body = match (&buffered, streamed.take()) {
                (Some(b), _) => Full::new(b.clone()).map_err(|never| match never {}).boxed(),
                (None, Some(s)) => s,
                (None, None) => return Handled::local(StatusCode::INTERNAL_SERVER_ERROR, "", ""),
            };
            let mut upstream_req = Request::new(body);
            *upstream_req.method_mut() = parts.method.clone();
            *upstream_req.uri_mut() = uri;
            *upstream_req.version_mut() = if h2 { Version::HTTP_2 } else { Version::HTTP_11 };
            *upstream_req.headers_mut() = parts.headers.clone();
            let sent = client.send(upstream_req);
            let outcome = match retry.and_then(|r| r.per_try_timeout) {
                Some(t) => tokio::time::timeout(t, sent).await.map_or(Try::Timeout, classify),
                None => classify(sent.await),
            };
            let upstream = pick.address.socket();
            pick.report(cluster.outlier_detection.as_ref(), failed(&outcome));
            let last_try = attempt + 1 == tries;
            if !last_try && retry.is_some_and(|r| should_retry(r, &outcome)) {
                drop(retry_slot.take()); // the retry that just ended gives its slot back first
                retry_slot = circuit.retry(limits);
                if retry_slot.is_some() {
                    last = Some(pick.address.clone());
                    drop((pick, request_slot, connection_slot));
                    tokio::time::sleep(backoff(attempt)).await;
                    continue;
                }
                // Over max_retries: Envoy does not retry and flags UO on the response it has.
                retry_overflow = true;
            }
            let mut handled = match outcome {
                Try::Response(resp) => {
                    let (mut rparts, rbody) = resp.into_parts();
                    strip_hop_by_hop(&mut rparts.headers);
                    rparts.version = Version::HTTP_11; // hyper's server writes its own version
                    // The slots and the pick are held until the body is done.
                    let held = Box::new((request_slot, connection_slot, retry_slot, pick));
                    Handled {
                        response: Response::from_parts(rparts, Guarded::boxed(rbody, held)),
                        cluster: None,
                        upstream: None,
                        flags: "",
                    }
                }
                Try::ConnectFailure => Handled::local(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
                    "UF",
                ),
                Try::Reset => Handled::local(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream connect error or disconnect/reset before headers. reset reason: connection termination",
                    "UC",
                ),
                Try::ProtocolError => Handled::local(StatusCode::BAD_GATEWAY, "upstream protocol error", "UPE"),
                Try::Timeout => Handled::local(StatusCode::GATEWAY_TIMEOUT, "upstream request timeout", "UT"),
            };
            handled.upstream = upstream;
            if retry_overflow {
                handled.flags = with_overflow(handled.flags);
            }
            return handled;
        }
        Handled::local(StatusCode::SERVICE_UNAVAILABLE, "no healthy upstream", "UH")
    };
    let handled = match fwd.timeout {
        Some(t) => match tokio::time::timeout(t, attempts).await {
            Ok(h) => h,
            Err(_) => Handled::local(StatusCode::GATEWAY_TIMEOUT, "upstream request timeout", "UT"),
        },
        None => attempts.await,
    };
    with_cluster(handled, cluster_name)
}

/// Envoy's answer to a circuit-breaker overflow.
fn overflow() -> Handled {
    let mut h = Handled::local(
        StatusCode::SERVICE_UNAVAILABLE,
        "upstream connect error or disconnect/reset before headers. reset reason: overflow",
        "UO",
    );
    h.response.headers_mut().insert(HeaderName::from_static("x-envoy-overloaded"), HeaderValue::from_static("true"));
    h
}

/// Adds `UO` to a try's flags (Envoy's order puts it after these).
fn with_overflow(flags: &'static str) -> &'static str {
    match flags {
        "" => "UO",
        "UF" => "UF,UO",
        "UC" => "UC,UO",
        "UT" => "UT,UO",
        "UPE" => "UO,UPE",
        other => other,
    }
}

/// Outlier detection's view of a try: non-split mode counts local failures as 5xx.
fn failed(t: &Try) -> bool {
    match t {
        Try::Response(r) => r.status().is_server_error(),
        Try::ConnectFailure | Try::Reset | Try::ProtocolError | Try::Timeout => true,
    }
}

fn with_cluster(mut h: Handled, cluster: String) -> Handled {
    h.cluster = Some(cluster);
    h
}

fn classify(r: Result<Response<ProxyBody>, SendError>) -> Try {
    match r {
        Ok(resp) => Try::Response(resp),
        Err(SendError::Connect(_)) => Try::ConnectFailure,
        Err(SendError::Reset(_)) => Try::Reset,
        Err(SendError::Protocol(_)) => Try::ProtocolError,
    }
}

/// Envoy's retry_on conditions for one try's outcome.
fn should_retry(p: &RetryPolicy, t: &Try) -> bool {
    let on = |c| p.retry_on.contains(&c);
    match t {
        Try::Response(r) => {
            let code = r.status().as_u16();
            (on(RetryOn::FiveXx) && code >= 500)
                || (on(RetryOn::GatewayError) && matches!(code, 502..=504))
                || (on(RetryOn::Retriable4xx) && code == 409)
                || (on(RetryOn::RetriableStatusCodes) && p.retriable_status_codes.contains(&code))
        }
        Try::ConnectFailure => on(RetryOn::FiveXx) || on(RetryOn::GatewayError) || on(RetryOn::ConnectFailure),
        Try::Reset => on(RetryOn::FiveXx) || on(RetryOn::Reset),
        Try::ProtocolError => on(RetryOn::FiveXx) || on(RetryOn::GatewayError),
        Try::Timeout => on(RetryOn::FiveXx) || on(RetryOn::GatewayError),
    }
}

/// Envoy's retry back-off: 25 ms base, doubling, full jitter, at most 250 ms.
fn backoff(attempt: u32) -> Duration {
    let cap = (25u64 << attempt.min(4)).min(250);
    Duration::from_millis(fastrand::u64(0..=cap))
}

/// Drops hop-by-hop headers, applies the host rewrite, and sets the headers
/// Envoy adds: x-forwarded-proto and x-request-id when absent.
#[doc(hidden)] // pub for benches/fuzz
pub fn prepare_headers(h: &mut HeaderMap, fwd: &Forward, uri: &Uri) {
    strip_hop_by_hop(h);
    // An HTTP/2 request carries its authority in the URI; HTTP/1.1 upstreams need it as Host.
    if !h.contains_key(header::HOST)
        && let Some(a) = uri.authority()
        && let Ok(v) = HeaderValue::from_str(a.as_str())
    {
        h.insert(header::HOST, v);
    }
    if let Some(host) = &fwd.host_rewrite
        && let Ok(v) = HeaderValue::from_str(host)
    {
        h.insert(header::HOST, v);
    }
    h.entry(X_FORWARDED_PROTO).or_insert(HeaderValue::from_static("http"));
    h.entry(X_REQUEST_ID).or_insert_with(request_id);
}

#[doc(hidden)] // pub for benches/fuzz
pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // One look at each name first: most messages carry none of these, and a
    // removal by name hashes the name each time (a tenth of the header work).
    if !h.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    // Headers named in Connection are hop-by-hop too.
    if h.contains_key(header::CONNECTION) {
        let named: Vec<HeaderName> = h
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
            .collect();
        for n in named {
            h.remove(n);
        }
    }
    for n in &HOP_BY_HOP {
        if n == header::TE && h.get(header::TE).is_some_and(|v| v == "trailers") {
            continue;
        }
        h.remove(n);
    }
}

/// A random UUID v4, as Envoy generates for x-request-id.
fn request_id() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let (a, b) = (fastrand::u64(..), fastrand::u64(..));
    let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000; // version 4
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000; // variant 10
    let bits = (u128::from(a) << 64) | u128::from(b);
    // Written by hand into a stack buffer: format! was a tenth of the proxy's
    // own instructions per request.
    let mut out = [0u8; 36];
    let mut nibble = 32;
    for (i, c) in out.iter_mut().enumerate() {
        if matches!(i, 8 | 13 | 18 | 23) {
            *c = b'-';
        } else {
            nibble -= 1;
            *c = HEX[((bits >> (nibble * 4)) & 0xf) as usize];
        }
    }
    HeaderValue::from_bytes(&out).unwrap_or(HeaderValue::from_static("00000000-0000-4000-8000-000000000000"))
}

/// The path and query to send upstream, parsed once for all tries: the
/// client's own when there is no rewrite.
fn upstream_path(fwd: &Forward, route: &Route, uri: &Uri) -> Result<PathAndQuery, hyper::http::uri::InvalidUri> {
    match (&fwd.prefix_rewrite, uri.path_and_query()) {
        (None, Some(pq)) => Ok(pq.clone()),
        _ => PathAndQuery::try_from(rewrite_path(fwd, route, uri)),
    }
}

/// The path and query to send upstream: with the matched prefix replaced
/// when the route says so.
#[doc(hidden)] // pub for benches/fuzz
pub fn rewrite_path(fwd: &Forward, route: &Route, uri: &Uri) -> String {
    let pq = uri.path_and_query().map_or("/", |p| p.as_str());
    match (&fwd.prefix_rewrite, matched_prefix_len(&route.matcher.path, pq)) {
        (Some(rewrite), Some(n)) if pq.is_char_boundary(n) => format!("{rewrite}{}", &pq[n..]),
        _ => pq.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_look_like_uuids() {
        let id = request_id();
        let s = id.to_str().unwrap();
        assert_eq!(s.len(), 36);
        assert_eq!(&s[14..15], "4");
        assert_ne!(request_id(), id);
    }

    #[test]
    fn hop_by_hop_headers_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert("connection", HeaderValue::from_static("keep-alive, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("x-keep", HeaderValue::from_static("1"));
        strip_hop_by_hop(&mut h);
        let names: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["te", "x-keep"]);

        // Any one of them alone is found; none leaves the map as it was.
        for name in ["keep-alive", "proxy-connection", "upgrade", "trailer", "te"] {
            let mut h = HeaderMap::new();
            h.insert("x-keep", HeaderValue::from_static("1"));
            h.insert(HeaderName::from_static(name), HeaderValue::from_static("x"));
            strip_hop_by_hop(&mut h);
            assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["x-keep"], "{name}");
        }
    }

    #[test]
    fn retry_conditions() {
        let p = RetryPolicy {
            retry_on: vec![RetryOn::ConnectFailure, RetryOn::RetriableStatusCodes],
            num_retries: 2,
            per_try_timeout: None,
            retriable_status_codes: vec![503],
        };
        assert!(should_retry(&p, &Try::ConnectFailure));
        assert!(!should_retry(&p, &Try::Reset));
        assert!(!should_retry(&p, &Try::Timeout));
        assert!(backoff(10) <= Duration::from_millis(250));
    }
}
