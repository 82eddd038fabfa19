//! Telemetry: Istio's standard metrics and access logs.
//!
//! The data path reports each finished request ([`RequestRecord`]) and each
//! TCP connection's open, bytes and close ([`TcpRecord`]) to one shared
//! [`Telemetry`]. Recording happens on the traffic workers, so it is built to
//! be cheap and to never wait: each worker thread records into its own shard of
//! atomic series (`shards`), and an access log entry is only queued, never
//! written, by a worker (`access_log`). Everything slow — merging shards,
//! encoding the Prometheus exposition, formatting and writing log lines — runs
//! on the control runtime's admin scrape or on the access log's own thread.
//!
//! Metric names, types and labels are Istio's (`metrics`, `labels`), encoded
//! by prometheus-client in the OpenMetrics text format; the admin endpoint
//! serves them with [`CONTENT_TYPE`].

mod access_log;
#[cfg(test)]
mod access_log_tests;
mod allocations;
mod labels;
mod metrics;
mod observer;
mod process;
mod shards;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use access_log::{AccessLog, AccessLogEntry, AccessLogOptions, AccessLogSink, format_rfc3339_millis};
pub use allocations::{AllocationCollector, CountingAllocator, allocations};
pub use labels::spiffe_id;
pub use labels::{
    ConnectionFlag, DEFAULT_TRUST_DOMAIN, Peer, Protocol, Reporter, ResponseFlags, SecurityPolicy, ServiceName,
    UNKNOWN, WorkloadLabels, ZtunnelLabels,
};
pub use metrics::{IstioMetrics, RequestRecord, TcpRecord};
pub use observer::Observer;
pub use shards::BUCKETS;

use crate::xds::{ResourceType, XdsMetrics};

/// The content type of [`Telemetry::encode`]'s output (OpenMetrics text,
/// which Prometheus negotiates and parses, counters' `_total` included).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("cannot open the access log file {}: {source}", path.display())]
    OpenAccessLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the access log writer thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// The proxy's metrics and access log, shared by the workers (`Arc`).
pub struct Telemetry {
    metrics: Arc<IstioMetrics>,
    access_log: AccessLog,
    registry: Registry,
}

impl fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Telemetry").field("metrics", &self.metrics).finish_non_exhaustive()
    }
}

impl Telemetry {
    /// Starts the access log writer and registers the Istio metrics and the
    /// access log's own counters in a registry of its own; other modules add
    /// theirs with [`Telemetry::register_collector`] before the value is shared.
    pub fn new(access_log: AccessLogOptions) -> Result<Telemetry, TelemetryError> {
        let metrics = Arc::new(IstioMetrics::default());
        let access_log = AccessLog::start(access_log)?;
        let mut registry = Registry::default();
        registry.register_collector(Box::new(metrics.clone()));
        registry.register_collector(Box::new(AccessLogCollector(access_log.counters())));
        registry.register_collector(Box::new(process::ProcessCollector));
        Ok(Telemetry { metrics, access_log, registry })
    }

    pub fn register_collector(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    /// For modules that register prometheus-client metrics directly.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    pub fn metrics(&self) -> &IstioMetrics {
        &self.metrics
    }

    pub fn access_log(&self) -> &AccessLog {
        &self.access_log
    }

    pub fn record_request(&self, r: &RequestRecord) {
        self.metrics.record_request(r);
    }

    pub fn tcp_opened(&self, c: &TcpRecord) {
        self.metrics.tcp_opened(c);
    }

    /// Bytes moved since the last report (Istio reports long connections
    /// periodically; the data path may call this as often as it likes).
    pub fn tcp_bytes(&self, c: &TcpRecord, sent: u64, received: u64) {
        self.metrics.tcp_bytes(c, sent, received);
    }

    /// The connection ended; `sent`/`received` are the bytes not yet reported.
    pub fn tcp_closed(&self, c: &TcpRecord, sent: u64, received: u64) {
        self.metrics.tcp_closed(c, sent, received);
    }

    /// Queues an access log line if logging is on. Build the entry only after
    /// checking `self.access_log().enabled()`.
    pub fn log(&self, entry: AccessLogEntry) -> bool {
        self.access_log.log(entry)
    }

    /// Appends the OpenMetrics exposition of everything registered, ending in
    /// `# EOF`. Run it on the control runtime: it merges every shard.
    pub fn encode(&self, out: &mut String) {
        if prometheus_client::encoding::text::encode(out, &self.registry).is_err() {
            // Writing to a String cannot fail; a collector could, and then the
            // scrape is cut short rather than the proxy.
            tracing::warn!("telemetry: a collector failed to encode");
        }
    }

    /// Closes the access log (flushing it); for shutdown.
    pub fn close(self) {
        self.access_log.close();
    }
}

#[derive(Debug)]
struct AccessLogCollector(Arc<access_log::AccessLogCounters>);

impl Collector for AccessLogCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let c = &self.0;
        for (name, help, v) in [
            ("meshperf_proxy_access_log_written", "Access log lines written.", &c.written),
            ("meshperf_proxy_access_log_dropped", "Access log entries dropped: the writer was behind.", &c.dropped),
            ("meshperf_proxy_access_log_write_errors", "Access log writes that failed.", &c.write_errors),
        ] {
            let m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            prometheus_client::metrics::counter::ConstCounter::new(v.load(Ordering::Relaxed)).encode(m)?;
        }
        Ok(())
    }
}

/// Serves the xDS client's counters through the same registry, so that
/// `/stats/prometheus` is one exposition: `meshperf_proxy_xds_acks_total`,
/// `_nacks_total`, `_reconnects_total` and the `_connected` gauge.
#[derive(Debug)]
pub struct XdsCollector(pub Arc<XdsMetrics>);

#[derive(Debug)]
struct TypeLabel(ResourceType);

impl EncodeLabelSet for TypeLabel {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        ("type", self.0.short()).encode(encoder.encode_label())
    }
}

type PerType = fn(&XdsMetrics, ResourceType) -> u64;

impl Collector for XdsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let x = &self.0;
        let per_type: [(&str, &str, PerType); 2] = [
            ("meshperf_proxy_xds_acks", "xDS responses applied and acknowledged.", XdsMetrics::acks),
            ("meshperf_proxy_xds_nacks", "xDS responses rejected (NACK), last good config kept.", XdsMetrics::nacks),
        ];
        for (name, help, get) in per_type {
            let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for &t in x.types() {
                m.encode_family(&TypeLabel(t))?.encode_counter::<NoLabelSet, _, u64>(&get(x, t), None)?;
            }
        }
        let m = encoder.encode_descriptor(
            "meshperf_proxy_xds_reconnects",
            "ADS streams re-established after a failure.",
            None,
            MetricType::Counter,
        )?;
        prometheus_client::metrics::counter::ConstCounter::new(x.reconnects()).encode(m)?;
        // XdsMetrics has no getter for the stream state; read it from its own
        // rendering until it grows one.
        let mut text = String::new();
        x.render(&mut text);
        let connected = text
            .lines()
            .find_map(|l| l.strip_prefix("meshperf_proxy_xds_connected "))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(0);
        let mut m = encoder.encode_descriptor(
            "meshperf_proxy_xds_connected",
            "Whether the ADS stream is up.",
            None,
            MetricType::Gauge,
        )?;
        m.encode_gauge(&connected)?;
        Ok(())
    }
}
