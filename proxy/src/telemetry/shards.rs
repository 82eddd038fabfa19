//! Where the series live: a map from label set to atomic counters, split into
//! shards that each traffic worker thread picks once and keeps, so that two
//! workers recording the same label set touch different locks and cache lines.
//! A recording takes its shard's read lock (uncontended: only the admin's
//! scrape also reads it, and readers do not wait for readers) and does relaxed
//! atomic adds; the write lock is taken only when a label set is seen for the
//! first time on that shard. A scrape merges the shards by label content.
//!
//! The map is keyed by the label set's hash, computed from the caller's
//! borrowed view of the labels, so the hot path never clones or allocates a key.
//! The hasher is std's randomly keyed SipHash: label values partly come from
//! peers, and a fixed fast hash would let one craft collisions.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

// foldhash rather than SipHash: hashing the 14 labels of every request with
// SipHash was 6% of the proxy's instructions; label values are config and
// identities, not attacker-chosen in bulk.
use foldhash::fast::RandomState;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};

/// More shards than Istio's default 2 workers and a typical 8-16 core host:
/// threads beyond this share shards, which stays correct, only less cheap.
pub(crate) const SHARDS: usize = 16;

/// Envoy's default histogram bounds (`HistogramSettingsImpl::defaultBuckets`
/// in Envoy's `source/common/stats/histogram_impl.cc`). Istio's stats filter
/// records its three histograms as Envoy histograms without bucket settings
/// of its own (only the `sidecar.istio.io/statsHistogramBuckets` annotation
/// changes them), so durations and byte sizes share these bounds.
pub const BUCKETS: [f64; 19] = [
    0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0, 60000.0, 300000.0,
    600000.0, 1800000.0, 3600000.0,
];

/// A fixed-bucket histogram of integers (milliseconds or bytes, as Envoy
/// records them): per-bucket counts, not cumulative, the last one `+Inf`.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, v: u64) {
        // Bucket i counts values <= BUCKETS[i] (Prometheus' `le`).
        let i = BUCKETS.partition_point(|b| *b < v as f64);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            counts: std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct HistogramSnapshot {
    pub(crate) counts: [u64; BUCKETS.len() + 1],
    pub(crate) sum: u64,
}

impl HistogramSnapshot {
    pub(crate) fn merge(&mut self, other: &HistogramSnapshot) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.sum += other.sum;
    }

    pub(crate) fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(upper bound, count in this bucket)` pairs as prometheus-client's
    /// encoder wants them (it accumulates).
    pub(crate) fn buckets(&self) -> Vec<(f64, u64)> {
        BUCKETS.iter().copied().chain([f64::INFINITY]).zip(self.counts).collect()
    }
}

/// The map's keys are already hashes.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Buckets<K, V> = HashMap<u64, Vec<(K, V)>, BuildHasherDefault<PassThrough>>;

/// Aligned so that two shards' locks never share a cache line.
#[repr(align(128))]
struct Shard<K, V> {
    map: RwLock<Buckets<K, V>>,
}

/// Series of one kind, sharded by recording thread.
pub(crate) struct ShardedSeries<K, V> {
    shards: Box<[Shard<K, V>]>,
    hasher: RandomState,
}

/// This thread's shard, chosen round robin on its first recording.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    INDEX.with(|i| *i)
}

impl<K: Ord + Clone, V: Default> ShardedSeries<K, V> {
    pub(crate) fn new() -> Self {
        let shards = (0..SHARDS).map(|_| Shard { map: RwLock::new(Buckets::default()) }).collect();
        ShardedSeries { shards, hasher: RandomState::default() }
    }

    /// Runs `f` on the series of the label set that `view` hashes and
    /// `matches`; `make_key` builds the owned key the first time.
    pub(crate) fn with<Q: Hash + ?Sized>(
        &self,
        view: &Q,
        matches: impl Fn(&K) -> bool,
        make_key: impl FnOnce() -> K,
        f: impl Fn(&V),
    ) {
        let hash = self.hasher.hash_one(view);
        let shard = &self.shards[shard_index()];
        {
            let map = shard.map.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, v)) = map.get(&hash).and_then(|b| b.iter().find(|(k, _)| matches(k))) {
                f(v);
                return;
            }
        }
        let mut map = shard.map.write().unwrap_or_else(PoisonError::into_inner);
        let bucket = map.entry(hash).or_default();
        // Another recording on this shard may have added it meanwhile.
        let i = match bucket.iter().position(|(k, _)| matches(k)) {
            Some(i) => i,
            None => {
                bucket.push((make_key(), V::default()));
                bucket.len() - 1
            }
        };
        f(&bucket[i].1);
    }

    /// Reads every series, merging equal label sets across shards; sorted by
    /// label set so that the exposition is stable from scrape to scrape.
    pub(crate) fn collect<S>(&self, read: impl Fn(&V) -> S, merge: impl Fn(&mut S, &S)) -> BTreeMap<K, S> {
        let mut out: BTreeMap<K, S> = BTreeMap::new();
        for shard in self.shards.iter() {
            let map = shard.map.read().unwrap_or_else(PoisonError::into_inner);
            for (k, v) in map.values().flatten() {
                let s = read(v);
                match out.get_mut(k) {
                    Some(acc) => merge(acc, &s),
                    None => {
                        out.insert(k.clone(), s);
                    }
                }
            }
        }
        out
    }

    /// How many distinct (per-shard) series exist, for tests and debugging.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.map.read().unwrap_or_else(PoisonError::into_inner).values().map(Vec::len).sum::<usize>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_le_inclusive() {
        let h = Histogram::default();
        for v in [0, 1, 2, 5, 3_600_000, 3_600_001] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.counts[0], 1, "0 <= 0.5");
        assert_eq!(s.counts[1], 1, "1 <= 1");
        assert_eq!(s.counts[2], 2, "2 and 5 <= 5");
        assert_eq!(s.counts[18], 1, "3600000 <= 3600000");
        assert_eq!(s.counts[19], 1, "above the last bound: +Inf");
        assert_eq!(s.count(), 6);
        assert_eq!(s.sum, 7_200_009);
    }

    #[test]
    fn equal_labels_from_threads_merge() {
        let series: ShardedSeries<String, AtomicU64> = ShardedSeries::new();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..1000u64 {
                        let key = if i % 2 == 0 { "a" } else { "b" };
                        series.with(
                            key,
                            |k| k == key,
                            || key.to_string(),
                            |v| {
                                v.fetch_add(1, Ordering::Relaxed);
                            },
                        );
                    }
                });
            }
        });
        let got = series.collect(|v| v.load(Ordering::Relaxed), |a, b| *a += b);
        assert_eq!(got.get("a"), Some(&2000));
        assert_eq!(got.get("b"), Some(&2000));
        assert!(series.len() >= 2);
    }
}
