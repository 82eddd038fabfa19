//! Istio's standard metrics: what the data path reports ([`RequestRecord`],
//! [`TcpRecord`]), the series they land in, and their encoding through
//! prometheus-client as a [`Collector`], with Istio's names and labels.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabel, EncodeLabelSet, LabelSetEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use super::labels::{Peer, Protocol, Reporter, ResponseFlags, SecurityPolicy, ServiceName, ZtunnelLabels, label};
use super::shards::{Histogram, HistogramSnapshot, ShardedSeries};

/// One finished HTTP or gRPC request, reported once its response is sent.
#[derive(Clone, Debug)]
pub struct RequestRecord {
    pub reporter: Reporter,
    pub source: Peer,
    pub destination: Peer,
    pub destination_service: ServiceName,
    pub protocol: Protocol,
    pub response_code: u16,
    pub response_flags: ResponseFlags,
    pub security: SecurityPolicy,
    /// From the first byte of the request to the last byte of the response.
    pub duration: Duration,
    /// Request size, headers and body, as Istio counts it.
    pub request_bytes: u64,
    /// Response size, headers and body.
    pub response_bytes: u64,
}

/// One proxied TCP connection's labels. Sent bytes are the response direction
/// (upstream to downstream), received bytes the request direction, as in
/// Istio's `istio_tcp_sent_bytes_total` / `istio_tcp_received_bytes_total`.
/// `request_protocol` is always `tcp`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcpRecord {
    pub reporter: Reporter,
    pub source: Peer,
    pub destination: Peer,
    pub destination_service: ServiceName,
    pub response_flags: ResponseFlags,
    pub security: SecurityPolicy,
    /// A node proxy's connection: ztunnel's label set (its flags instead of
    /// `response_flags`); None for a sidecar's, labelled as Envoy does.
    pub ztunnel: Option<ZtunnelLabels>,
}

/// The label set of a request series: a [`RequestRecord`] without its
/// measurements. Owned; built only the first time a label set is seen.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct RequestKey {
    reporter: Reporter,
    source: Peer,
    destination: Peer,
    service: ServiceName,
    protocol: Protocol,
    response_code: u16,
    response_flags: ResponseFlags,
    security: SecurityPolicy,
}

impl RequestKey {
    fn of(r: &RequestRecord) -> RequestKey {
        RequestKey {
            reporter: r.reporter,
            source: r.source.clone(),
            destination: r.destination.clone(),
            service: r.destination_service.clone(),
            protocol: r.protocol,
            response_code: r.response_code,
            response_flags: r.response_flags,
            security: r.security,
        }
    }

    fn matches(&self, r: &RequestRecord) -> bool {
        self.response_code == r.response_code
            && self.reporter == r.reporter
            && self.protocol == r.protocol
            && self.response_flags == r.response_flags
            && self.security == r.security
            && self.source == r.source
            && self.destination == r.destination
            && self.service == r.destination_service
    }
}

/// The labels of a record, borrowed, hashed on the hot path.
struct RequestView<'a>(&'a RequestRecord);

impl Hash for RequestView<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let r = self.0;
        (r.reporter, &r.source, &r.destination, &r.destination_service).hash(h);
        (r.protocol, r.response_code, r.response_flags, r.security).hash(h);
    }
}

#[derive(Debug, Default)]
pub(crate) struct RequestSeries {
    requests: AtomicU64,
    duration: Histogram,
    request_bytes: Histogram,
    response_bytes: Histogram,
}

#[derive(Debug, Default, Clone)]
struct RequestTotals {
    requests: u64,
    duration: HistogramSnapshot,
    request_bytes: HistogramSnapshot,
    response_bytes: HistogramSnapshot,
}

/// Which of a label set's three histograms a family encodes.
type PickHistogram = fn(&RequestTotals) -> &HistogramSnapshot;

#[derive(Debug, Default)]
pub(crate) struct TcpSeries {
    opened: AtomicU64,
    closed: AtomicU64,
    sent: AtomicU64,
    received: AtomicU64,
    /// Closed with a ztunnel failure flag (`istio_tcp_connections_failed`).
    failed: AtomicU64,
}

/// Series of Istio's standard metrics, registered with a prometheus-client
/// registry as one collector.
pub struct IstioMetrics {
    requests: ShardedSeries<RequestKey, RequestSeries>,
    tcp: ShardedSeries<TcpRecord, TcpSeries>,
}

impl fmt::Debug for IstioMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IstioMetrics")
            .field("request_series", &self.requests.len())
            .field("tcp_series", &self.tcp.len())
            .finish()
    }
}

impl Default for IstioMetrics {
    fn default() -> Self {
        IstioMetrics { requests: ShardedSeries::new(), tcp: ShardedSeries::new() }
    }
}

impl IstioMetrics {
    pub fn record_request(&self, r: &RequestRecord) {
        // Envoy's istio stats record whole milliseconds.
        let ms = u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX);
        self.requests.with(
            &RequestView(r),
            |k| k.matches(r),
            || RequestKey::of(r),
            |s| {
                s.requests.fetch_add(1, Ordering::Relaxed);
                s.duration.observe(ms);
                s.request_bytes.observe(r.request_bytes);
                s.response_bytes.observe(r.response_bytes);
            },
        );
    }

    fn tcp(&self, c: &TcpRecord, f: impl Fn(&TcpSeries)) {
        self.tcp.with(c, |k| k == c, || c.clone(), f);
    }

    pub fn tcp_opened(&self, c: &TcpRecord) {
        self.tcp(c, |s| {
            s.opened.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// Bytes moved since the last report on this connection.
    pub fn tcp_bytes(&self, c: &TcpRecord, sent: u64, received: u64) {
        self.tcp(c, |s| {
            s.sent.fetch_add(sent, Ordering::Relaxed);
            s.received.fetch_add(received, Ordering::Relaxed);
        });
    }

    /// The connection ended; `sent` and `received` are the bytes not yet
    /// reported with [`IstioMetrics::tcp_bytes`].
    pub fn tcp_closed(&self, c: &TcpRecord, sent: u64, received: u64) {
        let failed = c.ztunnel.as_ref().is_some_and(|z| z.flag.is_failure());
        self.tcp(c, |s| {
            s.closed.fetch_add(1, Ordering::Relaxed);
            if failed {
                s.failed.fetch_add(1, Ordering::Relaxed);
            }
            s.sent.fetch_add(sent, Ordering::Relaxed);
            s.received.fetch_add(received, Ordering::Relaxed);
        });
    }
}

fn encode_labels(pairs: &[(&str, &str)], encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
    for (k, v) in pairs {
        (*k, label(v)).encode(encoder.encode_label())?;
    }
    Ok(())
}

/// Istio's label order: the request's labels, then `response_code` (HTTP
/// metrics only), `response_flags` and `connection_security_policy`.
fn peer_labels<'a>(
    reporter: Reporter,
    src: &'a Peer,
    dst: &'a Peer,
    svc: &'a ServiceName,
    protocol: Protocol,
) -> [(&'static str, &'a str); 11] {
    [
        ("reporter", reporter.as_str()),
        ("source_workload", &src.workload),
        ("source_workload_namespace", &src.namespace),
        ("source_principal", &src.principal),
        ("destination_workload", &dst.workload),
        ("destination_workload_namespace", &dst.namespace),
        ("destination_principal", &dst.principal),
        ("destination_service", &svc.host),
        ("destination_service_name", &svc.name),
        ("destination_service_namespace", &svc.namespace),
        ("request_protocol", protocol.as_str()),
    ]
}

impl EncodeLabelSet for RequestKey {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        let (code, flags) = (self.response_code.to_string(), self.response_flags.to_string());
        encode_labels(
            &peer_labels(self.reporter, &self.source, &self.destination, &self.service, self.protocol),
            encoder,
        )?;
        encode_labels(
            &[
                ("response_code", &code),
                ("response_flags", &flags),
                ("connection_security_policy", self.security.as_str()),
            ],
            encoder,
        )
    }
}

impl EncodeLabelSet for TcpRecord {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        if let Some(z) = &self.ztunnel {
            return encode_ztunnel_labels(self, z, encoder);
        }
        let flags = self.response_flags.to_string();
        let peers =
            peer_labels(self.reporter, &self.source, &self.destination, &self.destination_service, Protocol::Tcp);
        encode_labels(&peers, encoder)?;
        encode_labels(&[("response_flags", &flags), ("connection_security_policy", self.security.as_str())], encoder)
    }
}

/// ztunnel's label set and order (its `CommonTrafficLabels`): `app` and
/// `version` repeat the canonical service and revision; the locality
/// labels follow, unknown (workload discovery's locality is not kept).
fn encode_ztunnel_labels(c: &TcpRecord, z: &ZtunnelLabels, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
    let (src, dst, svc) = (&c.source, &c.destination, &c.destination_service);
    let (s, d) = (&*z.source, &*z.destination);
    encode_labels(
        &[
            ("reporter", c.reporter.as_str()),
            ("source_workload", &src.workload),
            ("source_canonical_service", &s.canonical_service),
            ("source_canonical_revision", &s.canonical_revision),
            ("source_workload_namespace", &src.namespace),
            ("source_principal", &src.principal),
            ("source_app", &s.canonical_service),
            ("source_version", &s.canonical_revision),
            ("source_cluster", &s.cluster),
            ("destination_service", &svc.host),
            ("destination_service_namespace", &svc.namespace),
            ("destination_service_name", &svc.name),
            ("destination_workload", &dst.workload),
            ("destination_canonical_service", &d.canonical_service),
            ("destination_canonical_revision", &d.canonical_revision),
            ("destination_workload_namespace", &dst.namespace),
            ("destination_principal", &dst.principal),
            ("destination_app", &d.canonical_service),
            ("destination_version", &d.canonical_revision),
            ("destination_cluster", &d.cluster),
            ("request_protocol", Protocol::Tcp.as_str()),
            ("response_flags", z.flag.as_str()),
            ("connection_security_policy", c.security.as_str()),
            ("source_region", ""),
            ("source_zone", ""),
            ("destination_region", ""),
            ("destination_zone", ""),
        ],
        encoder,
    )
}

impl Collector for IstioMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let requests = self.requests.collect(
            |s| RequestTotals {
                requests: s.requests.load(Ordering::Relaxed),
                duration: s.duration.snapshot(),
                request_bytes: s.request_bytes.snapshot(),
                response_bytes: s.response_bytes.snapshot(),
            },
            |a, b| {
                a.requests += b.requests;
                a.duration.merge(&b.duration);
                a.request_bytes.merge(&b.request_bytes);
                a.response_bytes.merge(&b.response_bytes);
            },
        );
        // Like Envoy, a family appears once it has a series.
        if !requests.is_empty() {
            let mut m = encoder.encode_descriptor("istio_requests", "Requests handled.", None, MetricType::Counter)?;
            for (k, t) in &requests {
                m.encode_family(k)?.encode_counter::<NoLabelSet, _, u64>(&t.requests, None)?;
            }
            let histograms: [(&str, &str, PickHistogram); 3] = [
                ("istio_request_duration_milliseconds", "Request duration in milliseconds.", |t| &t.duration),
                ("istio_request_bytes", "Request sizes in bytes (headers and body).", |t| &t.request_bytes),
                ("istio_response_bytes", "Response sizes in bytes (headers and body).", |t| &t.response_bytes),
            ];
            for (name, help, pick) in histograms {
                let mut m = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
                for (k, t) in &requests {
                    let h = pick(t);
                    m.encode_family(k)?.encode_histogram::<NoLabelSet>(h.sum as f64, h.count(), &h.buckets(), None)?;
                }
            }
        }
        let tcp = self.tcp.collect(
            |s| [&s.sent, &s.received, &s.opened, &s.closed, &s.failed].map(|c| c.load(Ordering::Relaxed)),
            |a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
            },
        );
        if !tcp.is_empty() {
            let counters = [
                ("istio_tcp_sent_bytes", "Bytes sent to the downstream (response direction) on TCP connections."),
                (
                    "istio_tcp_received_bytes",
                    "Bytes received from the downstream (request direction) on TCP connections.",
                ),
                ("istio_tcp_connections_opened", "TCP connections opened."),
                ("istio_tcp_connections_closed", "TCP connections closed."),
                ("istio_tcp_connections_failed", "TCP connections that failed to establish (ztunnel's)."),
            ];
            // Only ztunnel has the failed family: a sidecar's output stays Envoy's.
            let families = if tcp.iter().any(|(k, _)| k.ztunnel.is_some()) { 5 } else { 4 };
            for (i, (name, help)) in counters.into_iter().enumerate().take(families) {
                let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
                // ztunnel makes a failed series only when a connection fails.
                for (k, v) in tcp.iter().filter(|(_, v)| i < 4 || v[i] > 0) {
                    m.encode_family(k)?.encode_counter::<NoLabelSet, _, u64>(&v[i], None)?;
                }
            }
        }
        Ok(())
    }
}
