//! `meshperf_proxy_allocations_total`: the heap allocations the process has
//! made since it started, so that a benchmark can divide them by its
//! requests (allocations per request) without a profiler.
//!
//! The binary's global allocator is [`CountingAllocator`] around jemalloc:
//! each allocation adds one to its thread's own counter (a plain load and
//! store on a cache line no other thread writes: no atomic read-modify-write,
//! no lock), and the scrape, on the control runtime, sums the counters.
//!
//! Why not jemalloc's own statistics (`stats.arenas.<all>.small.nrequests`
//! with the `stats` feature): a thread's count of allocations served from its
//! cache joins the arena's only when that cache refills from the arena or
//! flushes to it, and a proxy in a steady state frees what it allocates, so
//! neither happens for long stretches. Measured through the proxy (1000
//! requests a second, 1 kB): jemalloc's figure said 2.8 allocations a
//! request where this counter, exact, says 22.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

/// Threads with a counter of their own; later ones share the last, with an
/// atomic add (the proxy runs a handful: main, control, workers, signals).
const OWN_COUNTERS: usize = 31;

/// One counter per cache line, so that threads never share a line.
#[repr(align(64))]
struct Counter(AtomicU64);

#[allow(clippy::declare_interior_mutable_const)] // only to initialise the array
const ZERO: Counter = Counter(AtomicU64::new(0));
static COUNTERS: [Counter; OWN_COUNTERS + 1] = [ZERO; OWN_COUNTERS + 1];
static NEXT_COUNTER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: reading it never
    // allocates, which an allocator's own code must not do.
    static COUNTER: Cell<usize> = const { Cell::new(usize::MAX) };
}

// Not inlined: the allocator's entry points are inlined into every call site
// under LTO, and this body there grew the binary's text by 430 kB (and its
// resident size by 1 MB); a call costs a few cycles.
#[inline(never)]
fn count_one() {
    let index = COUNTER
        .try_with(|c| {
            if c.get() == usize::MAX {
                c.set(NEXT_COUNTER.fetch_add(1, Ordering::Relaxed).min(OWN_COUNTERS));
            }
            c.get()
        })
        .unwrap_or(OWN_COUNTERS);
    let counter = &COUNTERS[index].0;
    if index < OWN_COUNTERS {
        // This thread is the counter's only writer: no read-modify-write needed.
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    } else {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The allocations counted since the process started, every thread's.
pub fn allocations() -> u64 {
    COUNTERS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

/// A global allocator that counts each allocation (`alloc`, `alloc_zeroed`,
/// and `realloc`, which may move the block) and leaves the work to `A`.
#[derive(Debug, Default)]
pub struct CountingAllocator<A>(pub A);

#[allow(unsafe_code)]
// SAFETY: every call is passed to `A` unchanged with its own contract; the
// counting neither allocates nor touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAllocator<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: as above.
        unsafe { self.0.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: as above.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

/// Exports `meshperf_proxy_allocations_total`. Register it only in a process
/// whose global allocator is a [`CountingAllocator`] (the binary's is):
/// elsewhere nothing counts, and the counter would read zero.
#[derive(Debug, Default)]
pub struct AllocationCollector;

impl Collector for AllocationCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let m = encoder.encode_descriptor(
            "meshperf_proxy_allocations",
            "Heap allocations since the process started (allocations and reallocations, every thread).",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(allocations()).encode(m)
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::System;

    use super::*;

    /// The tests run on the system allocator; calling a counting one
    /// directly counts, from any thread: a thousand allocations on each of
    /// more threads than there are own counters (so the shared one too).
    #[test]
    fn every_allocation_is_counted_on_every_thread() {
        let counting = std::sync::Arc::new(CountingAllocator(System));
        let layout = Layout::from_size_align(24, 8).unwrap();
        let before = allocations();
        let threads: Vec<_> = (0..OWN_COUNTERS + 3)
            .map(|_| {
                let counting = counting.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        #[allow(unsafe_code)]
                        // SAFETY: a non-zero layout; the block is freed once, with it.
                        unsafe {
                            let block = counting.alloc(layout);
                            assert!(!block.is_null());
                            counting.dealloc(block, layout);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Other tests' threads may count too (the counters are the process's), never fewer.
        assert!(allocations() >= before + 1000 * (OWN_COUNTERS as u64 + 3));
    }

    #[test]
    fn the_exposition_names_the_counter() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(AllocationCollector));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains("# TYPE meshperf_proxy_allocations counter"), "{out}");
        assert!(out.lines().any(|l| l.starts_with("meshperf_proxy_allocations_total ")), "{out}");
    }
}
