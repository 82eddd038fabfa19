//! The xDS client's counters, served by the admin endpoint in Prometheus text
//! format. Plain atomics: the client is the only writer.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use super::ResourceType;

#[derive(Debug)]
pub struct XdsMetrics {
    /// The types the client subscribes to, the only ones rendered.
    types: &'static [ResourceType],
    acks: [AtomicU64; 7],
    nacks: [AtomicU64; 7],
    reconnects: AtomicU64,
    connected: AtomicU64,
}

/// A sidecar's: Envoy's types.
impl Default for XdsMetrics {
    fn default() -> Self {
        XdsMetrics::for_types(&ResourceType::ENVOY)
    }
}

impl XdsMetrics {
    pub fn for_types(types: &'static [ResourceType]) -> XdsMetrics {
        XdsMetrics {
            types,
            acks: Default::default(),
            nacks: Default::default(),
            reconnects: AtomicU64::new(0),
            connected: AtomicU64::new(0),
        }
    }
    pub fn types(&self) -> &'static [ResourceType] {
        self.types
    }
    pub fn ack(&self, t: ResourceType) {
        self.acks[t.index()].fetch_add(1, Ordering::Relaxed);
    }
    pub fn nack(&self, t: ResourceType) {
        self.nacks[t.index()].fetch_add(1, Ordering::Relaxed);
    }
    pub fn reconnect(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }
    pub fn set_connected(&self, up: bool) {
        self.connected.store(u64::from(up), Ordering::Relaxed);
    }
    pub fn acks(&self, t: ResourceType) -> u64 {
        self.acks[t.index()].load(Ordering::Relaxed)
    }
    pub fn nacks(&self, t: ResourceType) -> u64 {
        self.nacks[t.index()].load(Ordering::Relaxed)
    }
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }

    /// Appends the counters in Prometheus text exposition format.
    pub fn render(&self, out: &mut String) {
        let mut family = |name: &str, help: &str, values: &[AtomicU64; 7]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for &t in self.types {
                let _ = writeln!(out, "{name}{{type=\"{}\"}} {}", t.short(), values[t.index()].load(Ordering::Relaxed));
            }
        };
        family("meshperf_proxy_xds_acks_total", "xDS responses applied and acknowledged.", &self.acks);
        family("meshperf_proxy_xds_nacks_total", "xDS responses rejected (NACK), last good config kept.", &self.nacks);
        let _ = writeln!(
            out,
            "# HELP meshperf_proxy_xds_reconnects_total ADS streams re-established after a failure.\n\
             # TYPE meshperf_proxy_xds_reconnects_total counter\nmeshperf_proxy_xds_reconnects_total {}\n\
             # HELP meshperf_proxy_xds_connected Whether the ADS stream is up.\n\
             # TYPE meshperf_proxy_xds_connected gauge\nmeshperf_proxy_xds_connected {}",
            self.reconnects.load(Ordering::Relaxed),
            self.connected.load(Ordering::Relaxed)
        );
    }
}
