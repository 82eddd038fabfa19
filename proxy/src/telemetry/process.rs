//! The standard `process_*` metrics (Prometheus' client libraries export
//! them for every process), so that a Prometheus scraping the proxy reads its
//! CPU and memory the way Istio's benchmark reads a container's
//! (`rate(process_cpu_seconds_total[1m])` beside
//! `container_cpu_usage_seconds_total`), without the lab's /proc sampler.
//!
//! Read at scrape time on the control runtime: CPU from getrusage (every
//! thread of the process, user and system), memory from /proc/self/status.

use std::fmt;

use nix::sys::resource::{UsageWho, getrusage};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

#[derive(Debug, Default)]
pub(super) struct ProcessCollector;

/// CPU seconds (user + system) the process has used, all threads.
fn cpu_seconds() -> Option<f64> {
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    Some(secs(u.user_time()) + secs(u.system_time()))
}

/// A `Name:   123 kB` line of /proc/self/status, in bytes.
fn status_bytes(status: &str, name: &str) -> Option<i64> {
    let line = status.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
    let kb: i64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kb * 1024)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        if let Some(cpu) = cpu_seconds() {
            let m = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds.",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            ConstCounter::new(cpu).encode(m)?;
        }
        // Not on Linux (or /proc not mounted): no memory figures rather than
        // made-up ones.
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        for (name, field, help) in [
            ("process_resident_memory", "VmRSS", "Resident memory size in bytes."),
            ("process_virtual_memory", "VmSize", "Virtual memory size in bytes."),
        ] {
            if let Some(bytes) = status_bytes(&status, field) {
                let m = encoder.encode_descriptor(name, help, Some(&Unit::Bytes), MetricType::Gauge)?;
                ConstGauge::new(bytes).encode(m)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_in_bytes() {
        let status = "Name:\tproxy\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(status_bytes(status, "VmRSS"), Some(2048 * 1024));
        assert_eq!(status_bytes(status, "VmSize"), Some(123456 * 1024));
        assert_eq!(status_bytes(status, "VmHWM"), None);
    }

    #[test]
    fn the_exposition_has_the_standard_names() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        // Burn a little CPU so that the counter is above zero.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        let value = |name: &str| -> f64 {
            let line = out.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in {out}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_cpu_seconds_total ") > 0.0);
        assert!(value("process_resident_memory_bytes ") > 1e6);
        assert!(value("process_virtual_memory_bytes ") >= value("process_resident_memory_bytes "));
    }
}
