//! Idle timeouts for downstream connections, Envoy's `idle_timeout` of the
//! HTTP connection manager and of tcp_proxy (1 h by default, 0 disables; see
//! `state::listener`): a
//! connection on which no byte moves either way for that long is closed.
//!
//! Why not a timer reset on every request (hyper's header-read timeout
//! works that way): at sidecar rates each reset re-registers a timer and
//! wakes the runtime's poller through its eventfd, one extra `write` and
//! `epoll_wait` per request. Here the connection's reads and writes only
//! count bytes; the timer sleeps a whole timeout, and on waking closes the
//! connection if the count has not moved, or sleeps again. So an idle
//! connection is closed between one and two timeouts after its last byte.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes a connection has moved, read from the peer and written to it.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    read: AtomicU64,
    written: AtomicU64,
}

impl Traffic {
    pub(crate) fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
    pub(crate) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
    fn total(&self) -> u64 {
        self.read().wrapping_add(self.written())
    }

    /// Resolves once no byte has moved for at least `timeout` (and at most
    /// twice that); never, when `timeout` is None.
    pub(crate) async fn idle(&self, timeout: Option<Duration>) {
        let Some(timeout) = timeout else { return std::future::pending().await };
        loop {
            let seen = self.total();
            tokio::time::sleep(timeout).await;
            if self.total() == seen {
                return;
            }
        }
    }
}

/// A connection whose reads and writes are counted in its [`Traffic`].
pub(crate) struct Tracked<IO> {
    io: IO,
    traffic: Arc<Traffic>,
}

impl<IO> Tracked<IO> {
    pub(crate) fn new(io: IO) -> (Tracked<IO>, Arc<Traffic>) {
        let traffic = Arc::new(Traffic::default());
        (Tracked { io, traffic: traffic.clone() }, traffic)
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Tracked<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.traffic.read.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Tracked<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.count_written(&polled);
        polled
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.count_written(&polled);
        polled
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO> Tracked<IO> {
    fn count_written(&self, polled: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = polled {
            self.traffic.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn idle_fires_only_after_a_whole_timeout_without_bytes() {
        let (a, mut b) = tokio::io::duplex(64);
        let (mut a, traffic) = Tracked::new(a);
        let timeout = Duration::from_secs(10);
        let watch = {
            let traffic = traffic.clone();
            tokio::spawn(async move {
                let start = tokio::time::Instant::now();
                traffic.idle(Some(timeout)).await;
                start.elapsed()
            })
        };
        // Bytes at 5 s and 12 s keep it open; the last one is at 12 s.
        tokio::time::sleep(Duration::from_secs(5)).await;
        a.write_all(b"ping").await.unwrap();
        tokio::time::sleep(Duration::from_secs(7)).await;
        b.write_all(b"pong!").await.unwrap();
        let mut got = [0u8; 5];
        a.read_exact(&mut got).await.unwrap();
        let idle_after = watch.await.unwrap();
        // Checks at 10 s (moved), 20 s (moved), 30 s (still): closed at 30 s,
        // between one and two timeouts after the last byte.
        assert_eq!(idle_after, Duration::from_secs(30));
        assert_eq!((traffic.read(), traffic.written()), (5, 4));
    }

    #[tokio::test(start_paused = true)]
    async fn no_timeout_never_fires() {
        let traffic = Traffic::default();
        let fired = tokio::time::timeout(Duration::from_secs(1_000_000), traffic.idle(None)).await;
        assert!(fired.is_err());
    }
}
