//! Thread-per-core serving, as Envoy's workers: `--concurrency` threads, each
//! with a single-threaded tokio runtime and upstream pools of its own, so a
//! connection, its requests and the upstream connections that carry them all
//! run on one thread and nothing wakes another thread per request.
//!
//! Why not tokio's multi-threaded scheduler: at sidecar rates (a request every
//! millisecond or so) its workers sleep between requests, and each wake-up
//! also wakes an idle sibling to look for work to steal, which finds none. On
//! the 2-vCPU machine of the issue-4 measurements that was 1.6 context
//! switches per proxied request instead of 1.1, and about a fifth of the
//! proxy's CPU.
//!
//! Worker 0 accepts on every listener and hands each connection to the worker
//! with the fewest open connections (Envoy's exact connection balance), once
//! per connection; the kernel's SO_REUSEPORT hash would leave a worker idle as
//! often as not with the handful of long-lived connections a sidecar sees.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use super::drain::{DrainWatch, ListenersOpen, OpenConnection};
use super::listener::{self, ListenerTarget};
use super::{BoundListener, Proxy};
use crate::xds::Readiness;

/// When the drain is over, connection tasks close where they wait; this
/// bounds the wait for any that are running.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A connection accepted by worker 0, on its way to the worker that serves it.
struct Accepted {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    target: Arc<ListenerTarget>,
    /// Counted for the drain from its accept on.
    counted: OpenConnection,
}

/// One worker's inbox and its count of open connections.
struct Inbox {
    tx: mpsc::UnboundedSender<Accepted>,
    open: Arc<AtomicUsize>,
}

/// Hands accepted connections to the least loaded worker.
pub(crate) struct Handoff {
    inboxes: Vec<Inbox>,
}

impl Handoff {
    pub(crate) fn dispatch(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        target: Arc<ListenerTarget>,
        counted: OpenConnection,
    ) {
        let Some(inbox) = self.inboxes.iter().min_by_key(|i| i.open.load(Ordering::Relaxed)) else { return };
        // Leaving this runtime's poller is what lets another runtime register it.
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot hand a connection to a worker");
                return;
            }
        };
        inbox.open.fetch_add(1, Ordering::Relaxed);
        if inbox.tx.send(Accepted { stream, peer, target, counted }).is_err() {
            // The worker has stopped (the drain is over): the connection is dropped, closing it.
            inbox.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Decrements a worker's open-connection count when its connection ends.
struct WorkerConnection(Arc<AtomicUsize>);

impl Drop for WorkerConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The running worker threads.
pub struct Workers {
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// Builds `count` worker runtimes and binds the proxy's listeners on the
    /// first, so that a bad or busy address fails here, before anything runs.
    pub fn bind(proxy: &Proxy, count: usize) -> anyhow::Result<BoundWorkers> {
        let runtimes = (0..count.max(1))
            .map(|_| tokio::runtime::Builder::new_current_thread().enable_all().build())
            .collect::<Result<Vec<_>, _>>()
            .context("worker runtime")?;
        let listeners = runtimes[0].block_on(proxy.bind()).context("binding the proxy's listeners")?;
        Ok(BoundWorkers { proxy: proxy.clone(), runtimes, listeners })
    }

    /// Waits for every worker to stop (once the drain is over).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Worker runtimes with the listeners bound, not yet serving.
pub struct BoundWorkers {
    proxy: Proxy,
    runtimes: Vec<Runtime>,
    listeners: Vec<BoundListener>,
}

impl BoundWorkers {
    /// The bound addresses, in the order of the config's bindings.
    pub fn local_addrs(&self) -> Vec<std::io::Result<SocketAddr>> {
        self.listeners.iter().map(BoundListener::local_addr).collect()
    }

    /// Starts the worker threads; they accept until the drain starts and
    /// serve until it is over.
    ///
    /// With `ready`, the listeners accept only once the first complete
    /// config is applied: a connection made before then waits in the
    /// listen backlog instead of meeting a proxy with no routes (404) or no
    /// clusters (503). A sidecar restarted under load thus delays its first
    /// requests by the time its config takes to arrive, and fails none.
    /// Without it (config set directly, as tests do) they accept at once.
    pub fn start(self, drain: &DrainWatch, ready: Option<Readiness>) -> anyhow::Result<Workers> {
        let mut inboxes = Vec::new();
        let mut receivers = Vec::new();
        for _ in &self.runtimes {
            let (tx, rx) = mpsc::unbounded_channel();
            let open = Arc::new(AtomicUsize::new(0));
            inboxes.push(Inbox { tx, open: open.clone() });
            receivers.push((rx, open));
        }
        let handoff = Arc::new(Handoff { inboxes });
        // Counted before the threads start, so that a drain started at once
        // still waits for the listeners to close.
        let mut listeners = Some((self.listeners, drain.listeners_open()));
        let mut threads = Vec::new();
        for (index, (runtime, (inbox, open))) in self.runtimes.into_iter().zip(receivers).enumerate() {
            let proxy = if index == 0 { self.proxy.clone() } else { self.proxy.for_worker() };
            let accepting = listeners.take().map(|(listeners, open)| Accepting {
                listeners,
                open,
                handoff: handoff.clone(),
                ready: ready.clone(),
            });
            let drain = drain.clone();
            let thread = std::thread::Builder::new()
                .name(format!("worker-{index}"))
                .spawn(move || run_worker(runtime, proxy, accepting, inbox, open, drain))
                .context("starting a worker thread")?;
            threads.push(thread);
        }
        Ok(Workers { threads })
    }
}

/// What worker 0, which accepts, is given: the bound listeners, the drain's
/// count of them, the hand-off to the other workers, and the readiness the
/// listeners wait for.
struct Accepting {
    listeners: Vec<BoundListener>,
    open: ListenersOpen,
    handoff: Arc<Handoff>,
    ready: Option<Readiness>,
}

fn run_worker(
    runtime: Runtime,
    proxy: Proxy,
    accepting: Option<Accepting>,
    mut inbox: mpsc::UnboundedReceiver<Accepted>,
    open: Arc<AtomicUsize>,
    drain: DrainWatch,
) {
    let proxy_shared = proxy.shared.clone();
    runtime.block_on(async {
        let drain = drain.for_this_runtime();
        if let Some(Accepting { listeners, open: listeners_open, handoff, ready }) = accepting {
            tokio::spawn(async move {
                if let Some(mut ready) = ready {
                    let drain = listeners_open.watch().for_this_runtime();
                    tokio::select! {
                        _ = ready.wait() => {}
                        // Drained before any config came: close the listeners unserved.
                        _ = drain.draining() => {}
                    }
                }
                listener::serve_all(proxy_shared, listeners, Some(handoff), listeners_open).await;
            });
        }
        loop {
            tokio::select! {
                accepted = inbox.recv() => {
                    let Some(a) = accepted else {
                        // The listeners are closed (the drain has started):
                        // serve what is open until the drain is over.
                        drain.stopped().await;
                        break;
                    };
                    let guard = (WorkerConnection(open.clone()), a.counted);
                    match TcpStream::from_std(a.stream) {
                        Ok(stream) => listener::spawn_connection(proxy.shared.clone(), a.target, stream, a.peer, &drain, guard),
                        Err(e) => tracing::warn!(peer = %a.peer, error = %e, "worker cannot take a connection"),
                    }
                }
                _ = drain.stopped() => break,
            }
        }
    });
    runtime.shutdown_timeout(SHUTDOWN_WAIT);
}
