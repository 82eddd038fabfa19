//! Recording a request's metrics on the data path (see README.md):
//! `Telemetry::record_request` (per-thread shards of atomics) against the
//! plain prometheus-client way, a `Family` per metric keyed by a label struct
//! (four lookups per request under the family's shared RwLock, and the
//! histograms' per-series mutex). On 1 and 2 threads recording the same label
//! set, the worst case for contention and Istio's default concurrency; and a
//! scrape of 1000 series, which runs on the admin thread.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

use meshperf_proxy::telemetry::*;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

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

/// The wall time of `threads` threads each calling `f` `iters` times: per
/// call, what one worker pays while the others record too.
fn on_threads(threads: usize, iters: u64, f: &(impl Fn() + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..iters {
                    f();
                }
            });
        }
    });
    start.elapsed()
}

fn bench_telemetry(c: &mut Criterion) {
    let r = record();
    let telemetry = Arc::new(Telemetry::new(AccessLogOptions::default()).expect("telemetry"));
    let family = FamilyMetrics::new();
    let labels = family_labels(&r);
    for threads in [1, 2] {
        let mut g = c.benchmark_group(format!("record_request/threads_{threads}"));
        g.bench_function("sharded", |b| {
            b.iter_custom(|iters| on_threads(threads, iters, &|| telemetry.record_request(black_box(&r))))
        });
        g.bench_function("family_prebuilt_labels", |b| {
            b.iter_custom(|iters| on_threads(threads, iters, &|| family.record(black_box(&labels), black_box(&r))))
        });
        // What a data path that keeps only the record (not a prebuilt
        // Family key) would pay: build the key per request.
        g.bench_function("family_labels_per_request", |b| {
            b.iter_custom(|iters| {
                on_threads(threads, iters, &|| family.record(&family_labels(black_box(&r)), black_box(&r)))
            })
        });
        g.finish();
    }
    // A scrape with 1000 label sets.
    for code in 0..1000u16 {
        telemetry.record_request(&RecordWith { code }.into());
    }
    c.bench_function("encode/1000_series", |b| {
        b.iter(|| {
            let mut out = String::new();
            telemetry.encode(&mut out);
            out.len()
        })
    });
}

struct RecordWith {
    code: u16,
}

impl From<RecordWith> for RequestRecord {
    fn from(w: RecordWith) -> RequestRecord {
        RequestRecord { response_code: w.code, ..record() }
    }
}

fn config() -> Criterion {
    // The machine is shared (2 cores): short runs, enough samples for a median.
    Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(50)
}

criterion_group! { name = benches; config = config(); targets = bench_telemetry }
criterion_main!(benches);
