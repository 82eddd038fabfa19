//! Outlier detection, Envoy's consecutive-5xx kind in its default
//! (non-split) mode: a 5xx response, a connect failure, a reset, a protocol
//! error or a per-try timeout all count as a 5xx; any other response resets
//! the host's count. At `consecutive_5xx` in a row the count restarts and the
//! host is ejected with probability `enforcing_consecutive_5xx` percent, for
//! `base_ejection_time` × the number of times it has been ejected, capped at
//! `max_ejection_time` (or `base_ejection_time` when that is larger, as Envoy
//! does). The multiplier drops by one for every `interval` the host spends
//! back in service, so a host that recovered is not punished for old failures.
//!
//! Ejection is refused when it would take more than `max_ejection_percent` of
//! the cluster's hosts out (Envoy ≥ 1.31 counts the host about to go; its
//! opt-in `always_eject_one_host` is not in our model, so it is off, Envoy's
//! default). With the default 10%, a cluster needs ten hosts before one can
//! be ejected.
//!
//! Envoy returns hosts to service on its `interval` timer; here the load
//! balancer checks an ejected host's deadline when it considers the host
//! (lazily, at pick time), and an ejection attempt sweeps the cluster first.
//! That needs no timer task per cluster, costs nothing while no host is
//! ejected (one atomic load), and is more exact than the timer: a host comes
//! back when its time is up, not up to one interval later.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::state::OutlierDetection;

/// A cluster's ejection counters.
#[derive(Default)]
pub(crate) struct ClusterOutliers {
    active: AtomicU32,
    enforced_total: AtomicU64,
}

impl ClusterOutliers {
    /// Hosts ejected right now (Envoy's `outlier_detection.ejections_active`).
    pub fn active(&self) -> u32 {
        self.active.load(Ordering::Acquire)
    }

    /// Ejections done (Envoy's `outlier_detection.ejections_enforced_total`).
    pub fn enforced_total(&self) -> u64 {
        self.enforced_total.load(Ordering::Relaxed)
    }
}

/// One host's outlier state.
#[derive(Default)]
pub(crate) struct HostOutlier {
    consecutive_5xx: AtomicU32,
    /// Locked only to eject, to check an ejected host, or in a cluster with an ejection.
    ejection: Mutex<Ejection>,
}

#[derive(Default)]
struct Ejection {
    until: Option<Instant>,
    /// The back-off multiplier: ejections in a row, less one per interval in service.
    times: u32,
    returned_at: Option<Instant>,
}

impl HostOutlier {
    /// Counts one try's result; true when it ejected the host. `hosts` is the
    /// cluster's host count, `sweep` returns expired ejections to service
    /// before the percentage is checked.
    pub fn record(
        &self,
        cluster: &ClusterOutliers,
        cfg: &OutlierDetection,
        failed: bool,
        hosts: usize,
        now: Instant,
        sweep: impl FnOnce(),
    ) -> bool {
        if !failed {
            self.consecutive_5xx.store(0, Ordering::Relaxed);
            return false;
        }
        let n = self.consecutive_5xx.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if cfg.consecutive_5xx == 0 || n < cfg.consecutive_5xx {
            return false;
        }
        // Detected: Envoy restarts the count whether or not it ejects.
        self.consecutive_5xx.store(0, Ordering::Relaxed);
        if fastrand::u32(0..100) >= cfg.enforcing_consecutive_5xx {
            return false;
        }
        sweep();
        let Ok(mut e) = self.ejection.lock() else { return false };
        if e.until.is_some() {
            return false; // answers of tries sent before the ejection
        }
        if !may_eject(cluster.active(), hosts, cfg.max_ejection_percent) {
            return false;
        }
        if let Some(back) = e.returned_at {
            e.times = e.times.saturating_sub(intervals_between(back, now, cfg.interval));
        }
        // Past the cap more ejections would only take longer to decay.
        e.times = (e.times + 1).min(max_multiplier(cfg));
        e.until = Some(now + ejection_time(cfg, e.times));
        cluster.active.fetch_add(1, Ordering::AcqRel);
        cluster.enforced_total.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Whether the host is ejected at `now`; returns it to service when its
    /// time is up.
    pub fn is_ejected(&self, cluster: &ClusterOutliers, now: Instant) -> bool {
        let Ok(mut e) = self.ejection.lock() else { return false };
        match e.until {
            Some(t) if now < t => true,
            Some(_) => {
                e.until = None;
                e.returned_at = Some(now);
                self.consecutive_5xx.store(0, Ordering::Relaxed);
                cluster.active.fetch_sub(1, Ordering::AcqRel);
                false
            }
            None => false,
        }
    }
}

/// Envoy ≥ 1.31: eject only if the ejected hosts, this one included, stay
/// within max_ejection_percent of the cluster.
pub(crate) fn may_eject(active: u32, hosts: usize, max_percent: u32) -> bool {
    u64::from(active + 1) * 100 <= hosts as u64 * u64::from(max_percent)
}

/// base × times, capped at max(max_ejection_time, base).
pub(crate) fn ejection_time(cfg: &OutlierDetection, times: u32) -> Duration {
    let cap = cfg.max_ejection_time.max(cfg.base_ejection_time);
    cfg.base_ejection_time.saturating_mul(times.max(1)).min(cap)
}

/// The multiplier at which the cap is reached.
fn max_multiplier(cfg: &OutlierDetection) -> u32 {
    let base = cfg.base_ejection_time.as_nanos().max(1);
    let cap = cfg.max_ejection_time.max(cfg.base_ejection_time).as_nanos();
    u32::try_from(cap.div_ceil(base)).unwrap_or(u32::MAX).max(1)
}

fn intervals_between(from: Instant, to: Instant, interval: Duration) -> u32 {
    let n = to.saturating_duration_since(from).as_nanos() / interval.as_nanos().max(1);
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(consecutive: u32, base_ms: u64, max_ms: u64, percent: u32) -> OutlierDetection {
        OutlierDetection {
            consecutive_5xx: consecutive,
            consecutive_gateway_failure: None,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_millis(base_ms),
            max_ejection_time: Duration::from_millis(max_ms),
            max_ejection_percent: percent,
            enforcing_consecutive_5xx: 100,
        }
    }

    fn fail(h: &HostOutlier, c: &ClusterOutliers, cfg: &OutlierDetection, hosts: usize, now: Instant) -> bool {
        h.record(c, cfg, true, hosts, now, || {})
    }

    #[test]
    fn ejects_after_consecutive_failures_and_a_success_resets_the_count() {
        let (h, c, cfg) = (HostOutlier::default(), ClusterOutliers::default(), cfg(3, 30_000, 300_000, 100));
        let t0 = Instant::now();
        assert!(!fail(&h, &c, &cfg, 2, t0));
        assert!(!fail(&h, &c, &cfg, 2, t0));
        assert!(!h.record(&c, &cfg, false, 2, t0, || {}));
        assert!(!fail(&h, &c, &cfg, 2, t0));
        assert!(!fail(&h, &c, &cfg, 2, t0));
        assert!(fail(&h, &c, &cfg, 2, t0), "third in a row");
        assert!(h.is_ejected(&c, t0));
        assert_eq!((c.active(), c.enforced_total()), (1, 1));
        assert!(h.is_ejected(&c, t0 + Duration::from_millis(29_999)));
        assert!(!h.is_ejected(&c, t0 + Duration::from_secs(30)), "back after base_ejection_time");
        assert_eq!(c.active(), 0);
    }

    #[test]
    fn ejection_time_backs_off_and_is_capped() {
        let c = cfg(1, 30_000, 300_000, 100);
        assert_eq!(ejection_time(&c, 1), Duration::from_secs(30));
        assert_eq!(ejection_time(&c, 3), Duration::from_secs(90));
        assert_eq!(ejection_time(&c, 50), Duration::from_secs(300));
        // A base above the max: Envoy uses the base.
        assert_eq!(ejection_time(&cfg(1, 400_000, 300_000, 100), 2), Duration::from_secs(400));
        assert_eq!(max_multiplier(&c), 10);
    }

    #[test]
    fn repeated_ejections_last_longer_and_the_multiplier_decays_in_service() {
        let (h, c, od) = (HostOutlier::default(), ClusterOutliers::default(), cfg(1, 1_000, 300_000, 100));
        let mut now = Instant::now();
        assert!(fail(&h, &c, &od, 1, now));
        now += Duration::from_secs(1);
        assert!(!h.is_ejected(&c, now));
        assert!(fail(&h, &c, &od, 1, now), "ejected again at once: times 2");
        assert!(h.is_ejected(&c, now + Duration::from_millis(1_999)));
        now += Duration::from_secs(2);
        assert!(!h.is_ejected(&c, now));
        // 25 s in service is two 10 s intervals: the multiplier goes 2 → 0, so the next is 1 × base.
        now += Duration::from_secs(25);
        assert!(fail(&h, &c, &od, 1, now));
        assert!(!h.is_ejected(&c, now + Duration::from_secs(1)));
    }

    #[test]
    fn max_ejection_percent_counts_the_host_about_to_go() {
        assert!(!may_eject(0, 2, 10), "Envoy's default 10% ejects nobody of two");
        assert!(may_eject(0, 10, 10));
        assert!(!may_eject(1, 10, 10));
        assert!(may_eject(0, 2, 50));
        assert!(!may_eject(1, 2, 50));
        assert!(may_eject(1, 2, 100));
        let (h, c) = (HostOutlier::default(), ClusterOutliers::default());
        assert!(!fail(&h, &c, &cfg(1, 1_000, 300_000, 10), 2, Instant::now()));
        assert_eq!(c.active(), 0);
    }

    #[test]
    fn enforcing_zero_detects_but_never_ejects() {
        let (h, c) = (HostOutlier::default(), ClusterOutliers::default());
        let mut od = cfg(1, 1_000, 300_000, 100);
        od.enforcing_consecutive_5xx = 0;
        assert!((0..20).all(|_| !fail(&h, &c, &od, 1, Instant::now())));
        assert_eq!(c.enforced_total(), 0);
    }
}
