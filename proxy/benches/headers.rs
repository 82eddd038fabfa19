//! The header work of forwarding one request (see README.md): preparing the
//! upstream request's headers, dropping hop-by-hop headers from a response,
//! and rewriting the path. Each iteration gets a fresh copy of the headers;
//! the copy is made outside the measured time.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use hyper::{HeaderMap, Uri};
use meshperf_proxy::proxy::fuzzing::{prepare_headers, rewrite_path, strip_hop_by_hop};
use meshperf_proxy::state::*;

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, v.parse().expect("header value"));
    }
    h
}

/// What a typical HTTP/1.1 client sends: 10 headers, Connection included.
fn request_headers() -> HeaderMap {
    headers(&[
        ("host", "reviews.default.svc.cluster.local:9080"),
        ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0"),
        ("accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        ("accept-encoding", "gzip, deflate, br"),
        ("accept-language", "en-US,en;q=0.9"),
        ("authorization", "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJl"),
        ("cookie", "session=8c6976e5b5410415bde908bd4dee15df; theme=dark"),
        ("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7"),
        ("x-b3-spanid", "e457b5a2e4d86bd1"),
        ("connection", "keep-alive"),
    ])
}

/// A gRPC call's headers (HTTP/2: no Host, the authority is in the URI).
fn grpc_request_headers() -> HeaderMap {
    headers(&[
        ("content-type", "application/grpc"),
        ("user-agent", "grpc-go/1.85.0"),
        ("te", "trailers"),
        ("grpc-timeout", "2999m"),
        ("grpc-accept-encoding", "gzip"),
        ("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7"),
        ("x-b3-spanid", "e457b5a2e4d86bd1"),
    ])
}

/// An upstream HTTP/1.1 response's headers, hop-by-hop ones included.
fn response_headers() -> HeaderMap {
    headers(&[
        ("content-type", "application/json"),
        ("date", "Tue, 01 Jul 2025 10:00:00 GMT"),
        ("server", "istio-envoy"),
        ("x-envoy-upstream-service-time", "3"),
        ("cache-control", "no-cache"),
        ("transfer-encoding", "chunked"),
        ("connection", "keep-alive, x-debug"),
        ("keep-alive", "timeout=5"),
        ("x-debug", "1"),
        ("vary", "accept-encoding"),
    ])
}

fn forward(prefix_rewrite: Option<&str>, host_rewrite: Option<&str>) -> Forward {
    Forward {
        target: ClusterTarget::Cluster("outbound|9080||reviews.default.svc.cluster.local".into()),
        timeout: Some(Duration::from_secs(15)),
        retry: None,
        prefix_rewrite: prefix_rewrite.map(String::from),
        host_rewrite: host_rewrite.map(String::from),
        terminate_connect: false,
    }
}

/// A route matching `prefix`; rewrite_path reads only its matcher (the
/// forward action is passed on its own).
fn route_with_prefix(prefix: &str) -> Route {
    Route {
        name: "api".into(),
        matcher: RouteMatch { path: PathMatch::Prefix(prefix.into()), case_sensitive: true, headers: vec![] },
        action: RouteAction::DirectResponse { status: 200, body: None },
        fault: None,
    }
}

fn bench_headers(c: &mut Criterion) {
    let uri: Uri = "/api/v1/reviews/42?sort=date&limit=10".parse().expect("uri");
    let mut g = c.benchmark_group("headers");

    // No x-request-id: one is generated (Envoy's default for a new trace).
    let plain = forward(None, None);
    let req = request_headers();
    g.bench_function("prepare_headers/new_request_id", |b| {
        b.iter_batched_ref(
            || req.clone(),
            |h| prepare_headers(h, black_box(&plain), black_box(&uri)),
            BatchSize::SmallInput,
        )
    });

    // The id is already set (a hop inside the mesh) and the route rewrites Host.
    let rewrite = forward(None, Some("reviews-v2.default.svc.cluster.local"));
    let mut with_id = request_headers();
    with_id.insert("x-request-id", "6e1c7f0e-3c2a-4e8b-9a57-2b8d1f0c4a11".parse().expect("id"));
    g.bench_function("prepare_headers/existing_id_host_rewrite", |b| {
        b.iter_batched_ref(
            || with_id.clone(),
            |h| prepare_headers(h, black_box(&rewrite), black_box(&uri)),
            BatchSize::SmallInput,
        )
    });

    // A gRPC call as grpc-go sends it over HTTP/2: the authority in the URI,
    // te: trailers (kept for the upstream), a deadline.
    let grpc_uri: Uri = "http://echo.lab.svc.cluster.local:8079/fgrpc.PingServer/Ping".parse().expect("uri");
    let grpc = grpc_request_headers();
    g.bench_function("prepare_headers/grpc_call", |b| {
        b.iter_batched_ref(
            || grpc.clone(),
            |h| prepare_headers(h, black_box(&plain), black_box(&grpc_uri)),
            BatchSize::SmallInput,
        )
    });

    let resp = response_headers();
    g.bench_function("strip_hop_by_hop/response", |b| {
        b.iter_batched_ref(|| resp.clone(), |h| strip_hop_by_hop(black_box(h)), BatchSize::SmallInput)
    });

    let (api, fwd) = (route_with_prefix("/api/v1"), forward(Some("/v1"), None));
    assert_eq!(rewrite_path(&fwd, &api, &uri), "/v1/reviews/42?sort=date&limit=10");
    g.bench_function("rewrite_path/prefix_rewrite", |b| {
        b.iter(|| rewrite_path(black_box(&fwd), black_box(&api), black_box(&uri)))
    });

    let catch_all = route_with_prefix("/");
    g.bench_function("rewrite_path/none", |b| {
        b.iter(|| rewrite_path(black_box(&plain), black_box(&catch_all), black_box(&uri)))
    });
    g.finish();
}

fn config() -> Criterion {
    // The machine is shared (2 cores): short runs, enough samples for a median.
    Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(50)
}

criterion_group! { name = benches; config = config(); targets = bench_headers }
criterion_main!(benches);
