//! Draining, as Envoy does when Istio stops a pod (Envoy's `--drain-time-s`,
//! Istio's `terminationDrainDuration`): the listeners close at once, so a new
//! connection is refused rather than accepted and dropped; an HTTP connection
//! finishes the requests it is serving and closes (HTTP/1.1 answers them with
//! `Connection: close` and an idle keep-alive connection closes at once;
//! HTTP/2 sends GOAWAY); a TCP connection runs on. The drain ends as soon as
//! no connection is left, or when the drain period is over, whichever comes
//! first; then what remains is closed.
//!
//! [`Drain`] starts it (main, on SIGTERM, SIGINT or `/quitquitquit`);
//! listeners and connections hold a [`DrainWatch`]. A connection checks the
//! phase whenever it wakes, so that a response finished after the drain has
//! started says `Connection: close`: it reads an atomic, and waits for a
//! change on a copy of the phase that a task of its own runtime relays
//! ([`DrainWatch::for_this_runtime`]), never on a lock that another worker
//! thread takes too.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// Where the proxy is in its life; only ever moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Phase {
    Serving,
    /// Listeners closed; connections finish what they serve.
    Draining,
    /// The drain is over: every connection still open is closed.
    Stopped,
}

/// What a drain and its watches share.
struct Shared {
    /// The phase, to wait for its changes.
    phase: watch::Sender<Phase>,
    /// The same, to read without a lock.
    phase_now: AtomicU8,
    /// Accepted connections not yet closed.
    connections: watch::Sender<usize>,
    /// Listener sets being served (each [`ListenersOpen`]).
    listeners: watch::Sender<usize>,
}

/// A new drain, not started, and the watch that listeners and connections hold.
pub fn channel() -> (Drain, DrainWatch) {
    let shared = Arc::new(Shared {
        phase: watch::channel(Phase::Serving).0,
        phase_now: AtomicU8::new(Phase::Serving as u8),
        connections: watch::channel(0).0,
        listeners: watch::channel(0).0,
    });
    let watch = DrainWatch { phase: shared.phase.subscribe(), shared: shared.clone() };
    (Drain { shared }, watch)
}

/// Starts the drain. Dropped without [`Drain::drain`], it stops everything at
/// once, so that a proxy whose owner has gone does not serve on.
pub struct Drain {
    shared: Arc<Shared>,
}

/// How a drain went, as logged at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Connections open when the listeners had closed.
    pub open_at_start: usize,
    /// Connections still open when the drain period ended, then closed.
    pub closed_at_deadline: usize,
    /// From the start of the drain to its end (tokio's clock).
    pub elapsed: Duration,
}

impl Shared {
    /// Moves the phase forward to `to` (never back); true if it moved.
    fn advance(&self, to: Phase) -> bool {
        self.phase_now.fetch_max(to as u8, Ordering::AcqRel);
        self.phase.send_if_modified(|p| {
            let moved = *p < to;
            *p = (*p).max(to);
            moved
        })
    }

    fn reached(&self, phase: Phase) -> bool {
        self.phase_now.load(Ordering::Acquire) >= phase as u8
    }
}

impl Drain {
    /// Closes the listeners, waits up to `period` for the open connections to
    /// finish (none, when `period` is zero), then closes the rest. Logs one
    /// line when the listeners are closed and one at the end.
    pub async fn drain(self, period: Duration) -> DrainReport {
        let start = Instant::now();
        self.shared.advance(Phase::Draining);
        // Each listener set closes on its own runtime; once all have, nothing
        // new is counted, so the count below is the whole drain's.
        self.watch().listeners_closed().await;
        let mut connections = self.shared.connections.subscribe();
        let open_at_start = *connections.borrow_and_update();
        tracing::info!(
            open_connections = open_at_start,
            drain_duration = ?period,
            "draining: listeners closed, new connections are refused; waiting for open connections to finish"
        );
        let _ = tokio::time::timeout(period, connections.wait_for(|open| *open == 0)).await;
        let closed_at_deadline = *connections.borrow();
        self.shared.advance(Phase::Stopped);
        let report = DrainReport { open_at_start, closed_at_deadline, elapsed: start.elapsed() };
        tracing::info!(
            finished = open_at_start.saturating_sub(closed_at_deadline),
            closed_at_deadline,
            elapsed = ?report.elapsed,
            "drained"
        );
        report
    }

    pub fn watch(&self) -> DrainWatch {
        DrainWatch { phase: self.shared.phase.subscribe(), shared: self.shared.clone() }
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        self.shared.advance(Phase::Stopped);
    }
}

/// The drain as listeners, connections and the admin endpoint see it.
#[derive(Clone)]
pub struct DrainWatch {
    /// The phase as relayed to this runtime (or the drain's own, before
    /// [`DrainWatch::for_this_runtime`]).
    phase: watch::Receiver<Phase>,
    shared: Arc<Shared>,
}

impl DrainWatch {
    /// True from the start of the drain on.
    pub fn is_draining(&self) -> bool {
        self.shared.reached(Phase::Draining)
    }

    /// Connections accepted and not yet closed.
    pub fn open_connections(&self) -> usize {
        *self.shared.connections.borrow()
    }

    /// Resolves when the drain starts.
    pub async fn draining(&self) {
        self.reached(Phase::Draining).await
    }

    /// Resolves once the drain has started and every listener is closed:
    /// from then on a new connection is refused.
    pub async fn listeners_closed(&self) {
        self.draining().await;
        let _ = self.shared.listeners.subscribe().wait_for(|open| *open == 0).await;
    }

    /// Resolves when the drain is over and open connections must close.
    pub async fn stopped(&self) {
        self.reached(Phase::Stopped).await
    }

    async fn reached(&self, phase: Phase) {
        let mut rx = self.phase.clone();
        // Err: the relay or the drain is gone, which only happens once stopped.
        let mut changed = std::pin::pin!(rx.wait_for(|p| *p >= phase));
        // The atomic first: this runtime's relay may not have run yet.
        std::future::poll_fn(|cx| {
            if self.shared.reached(phase) {
                return Poll::Ready(());
            }
            changed.as_mut().poll(cx).map(|_| ())
        })
        .await
    }

    /// The same watch with the phase relayed by a task on the current runtime.
    pub(crate) fn for_this_runtime(&self) -> DrainWatch {
        let mut source = self.shared.phase.subscribe();
        let (relay, phase) = watch::channel(*source.borrow_and_update());
        tokio::spawn(async move {
            loop {
                if *relay.borrow() == Phase::Stopped || source.changed().await.is_err() {
                    return;
                }
                relay.send_replace(*source.borrow_and_update());
            }
        });
        DrainWatch { phase, shared: self.shared.clone() }
    }

    /// Counts one accepted connection until the returned guard is dropped.
    pub(crate) fn connection(&self) -> OpenConnection {
        self.shared.connections.send_modify(|n| *n += 1);
        OpenConnection(self.shared.clone())
    }

    /// Counts one set of listeners being served until the guard is dropped,
    /// which is when its sockets are closed. Taken before the serving task is
    /// spawned, so that a drain started meanwhile waits for it.
    pub(crate) fn listeners_open(&self) -> ListenersOpen {
        self.shared.listeners.send_modify(|n| *n += 1);
        ListenersOpen { watch: self.clone() }
    }
}

/// One accepted connection, counted until dropped.
pub(crate) struct OpenConnection(Arc<Shared>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.send_modify(|n| *n -= 1);
    }
}

/// One set of listeners, counted until their sockets are closed.
pub(crate) struct ListenersOpen {
    watch: DrainWatch,
}

impl ListenersOpen {
    pub(crate) fn watch(&self) -> &DrainWatch {
        &self.watch
    }
}

impl Drop for ListenersOpen {
    fn drop(&mut self) {
        self.watch.shared.listeners.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ends_when_the_last_connection_closes() {
        let (drain, watch) = channel();
        let conn = watch.connection();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(conn);
        });
        let report = drain.drain(Duration::from_secs(30)).await;
        assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 0));
        assert_eq!(report.elapsed, Duration::from_secs(2));
        assert!(watch.is_draining());
        release.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn closes_what_remains_at_the_deadline() {
        let (drain, watch) = channel();
        let _conn = watch.connection();
        let local = watch.for_this_runtime();
        let report = drain.drain(Duration::from_secs(5)).await;
        assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 1));
        assert_eq!(report.elapsed, Duration::from_secs(5));
        // The relayed phase follows.
        tokio::time::timeout(Duration::from_secs(1), local.stopped()).await.expect("relayed stop");
    }

    #[tokio::test(start_paused = true)]
    async fn zero_period_stops_at_once_and_waits_for_listeners_to_close() {
        let (drain, watch) = channel();
        let _conn = watch.connection();
        let listeners = watch.listeners_open();
        let closer = tokio::spawn(async move {
            listeners.watch().draining().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            drop(listeners);
        });
        let report = drain.drain(Duration::ZERO).await;
        assert_eq!((report.open_at_start, report.closed_at_deadline), (1, 1));
        assert_eq!(report.elapsed, Duration::from_millis(10), "the listeners' closing, no more");
        closer.await.unwrap();
    }

    #[tokio::test]
    async fn dropping_the_drain_stops_everything() {
        let (drain, watch) = channel();
        assert!(!watch.is_draining());
        drop(drain);
        tokio::time::timeout(Duration::from_secs(1), watch.stopped()).await.expect("stopped when dropped");
    }
}
