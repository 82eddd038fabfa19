//! Micro-benchmark of recording a request on the data path, as a Go-style
//! timing loop (criterion is not a dependency). Ignored by default; run with
//!
//!     cargo test --release --test telemetry_bench -- --ignored --nocapture
//!
//! It compares `Telemetry::record_request` (per-thread shards of atomics) with
//! the plain prometheus-client way: a `Family` per metric keyed by a label
//! struct, four lookups per request under the family's shared RwLock, and the
//! histograms' per-series mutex. Both on 1 and 2 threads recording the same
//! label set, the worst case for contention and Istio's default concurrency.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use meshperf_proxy::telemetry::*;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

const ITERS: u64 = 2_000_000;

fn record() -> RequestRecord {
    RequestRecord {
        reporter: Reporter::Source,
        source: Peer::new("cart-v1", "shop", "spiffe://cluster.local/ns/shop/sa/cart"),
        destination: Peer::new("web-v1", "shop", "spiffe://cluster.local/ns/shop/sa/web"),
        destination_service: ServiceName::from_host("web.shop.svc.cluster.local"),
        protocol: Protocol::Http,
        response_code: 200,
        response_flags: ResponseFlags::NONE,
        security: SecurityPolicy::Unknown,
        duration: Duration::from_micros(900),
        request_bytes: 120,
        response_bytes: 1100,
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabels {
    reporter: &'static str,
    source_workload: String,
    source_workload_namespace: String,
    source_principal: String,
    destination_workload: String,
    destination_workload_namespace: String,
    destination_principal: String,
    destination_service: String,
    destination_service_name: String,
    destination_service_namespace: String,
    request_protocol: &'static str,
    response_code: u16,
    response_flags: String,
    connection_security_policy: &'static str,
}

struct FamilyMetrics {
    requests: Family<FamilyLabels, Counter>,
    duration: Family<FamilyLabels, Histogram>,
    request_bytes: Family<FamilyLabels, Histogram>,
    response_bytes: Family<FamilyLabels, Histogram>,
}

impl FamilyMetrics {
    fn new() -> Self {
        let h = || Histogram::new(BUCKETS);
        FamilyMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(h),
            request_bytes: Family::new_with_constructor(h),
            response_bytes: Family::new_with_constructor(h),
        }
    }
    fn record(&self, l: &FamilyLabels, r: &RequestRecord) {
        self.requests.get_or_create(l).inc();
        self.duration.get_or_create(l).observe(r.duration.as_millis() as f64);
        self.request_bytes.get_or_create(l).observe(r.request_bytes as f64);
        self.response_bytes.get_or_create(l).observe(r.response_bytes as f64);
    }
}

fn family_labels(r: &RequestRecord) -> FamilyLabels {
    FamilyLabels {
        reporter: r.reporter.as_str(),
        source_workload: r.source.workload.to_string(),
        source_workload_namespace: r.source.namespace.to_string(),
        source_principal: r.source.principal.to_string(),
        destination_workload: r.destination.workload.to_string(),
        destination_workload_namespace: r.destination.namespace.to_string(),
        destination_principal: r.destination.principal.to_string(),
        destination_service: r.destination_service.host.to_string(),
        destination_service_name: r.destination_service.name.to_string(),
        destination_service_namespace: r.destination_service.namespace.to_string(),
        request_protocol: r.protocol.as_str(),
        response_code: r.response_code,
        response_flags: r.response_flags.to_string(),
        connection_security_policy: r.security.as_str(),
    }
}

/// ns per call of `f`, each of `threads` threads calling it ITERS times
/// (wall time over all calls of one thread: what a worker pays).
fn time(threads: usize, f: impl Fn() + Sync) -> f64 {
    let f = &f;
    for _ in 0..10_000 {
        f();
    }
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                for _ in 0..ITERS {
                    f();
                }
            });
        }
    });
    start.elapsed().as_nanos() as f64 / ITERS as f64
}

#[test]
#[ignore = "benchmark; run with --release --ignored --nocapture"]
fn record_request_ns() {
    let r = record();
    let telemetry = Arc::new(Telemetry::new(AccessLogOptions::default()).expect("telemetry"));
    let family = FamilyMetrics::new();
    let labels = family_labels(&r);
    for threads in [1, 2] {
        let sharded = time(threads, || telemetry.record_request(black_box(&r)));
        let fam = time(threads, || family.record(black_box(&labels), black_box(&r)));
        // What a data path that keeps only the record (not a prebuilt
        // Family key) would pay: build the key per request.
        let fam_build = time(threads, || family.record(&family_labels(black_box(&r)), black_box(&r)));
        println!(
            "threads={threads}: Telemetry::record_request {sharded:.1} ns/op; \
             Family, prebuilt labels {fam:.1} ns/op; Family, labels built per request {fam_build:.1} ns/op"
        );
    }
    // A scrape with 1000 label sets, on the admin thread.
    for code in 0..1000u16 {
        telemetry.record_request(&RecordWith { code }.into());
    }
    let start = Instant::now();
    let mut out = String::new();
    telemetry.encode(&mut out);
    println!("encode: {} series, {} bytes in {:?}", 1001, out.len(), start.elapsed());
}

struct RecordWith {
    code: u16,
}

impl From<RecordWith> for RequestRecord {
    fn from(w: RecordWith) -> RequestRecord {
        RequestRecord { response_code: w.code, ..record() }
    }
}
