//! One HTTP/2 stream as a byte stream (tokio AsyncRead + AsyncWrite), the
//! same on both ends of HBONE; and the keep-alive PINGs of a connection.
//!
//! Writes wait for flow-control capacity (the peer's window), so a slow
//! reader slows the writer instead of growing a buffer; received data frees
//! window as soon as it is taken off the stream, since at most one frame is
//! held here. `shutdown` sends END_STREAM (the peer reads EOF: a TCP FIN);
//! END_STREAM from the peer reads as EOF.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes};
use h2::{Reason, RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct H2Stream {
    send: SendStream<Bytes>,
    recv: RecvStream,
    /// The rest of the last DATA frame, not yet read.
    pending: Bytes,
    ended: bool,
}

impl H2Stream {
    pub(crate) fn new(send: SendStream<Bytes>, recv: RecvStream) -> H2Stream {
        H2Stream { send, recv, pending: Bytes::new(), ended: false }
    }
}

/// A reset with NO_ERROR after the data is a normal end (RFC 9113 8.1), not a failure.
fn io_error(e: h2::Error) -> io::Error {
    if e.is_io() {
        return e.into_io().unwrap_or_else(|| io::Error::other("HTTP/2 I/O error"));
    }
    match e.reason() {
        Some(Reason::CANCEL) | Some(Reason::REFUSED_STREAM) => io::Error::new(io::ErrorKind::ConnectionReset, e),
        _ => io::Error::other(e),
    }
}

impl AsyncRead for H2Stream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        while self.pending.is_empty() {
            match ready!(self.recv.poll_data(cx)) {
                None => return Poll::Ready(Ok(())),
                Some(Err(e)) if e.reason() == Some(Reason::NO_ERROR) => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Some(Ok(data)) => {
                    // Freed at once: the frame is now ours, bounded by the frame size.
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    self.pending = data;
                }
            }
        }
        let n = self.pending.len().min(buf.remaining());
        buf.put_slice(&self.pending[..n]);
        self.pending.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for H2Stream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.send.reserve_capacity(buf.len());
        loop {
            match ready!(self.send.poll_capacity(cx)) {
                None => return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
                Some(Err(e)) => return Poll::Ready(Err(io_error(e))),
                Some(Ok(0)) => continue,
                Some(Ok(n)) => {
                    let n = n.min(buf.len());
                    let data = Bytes::copy_from_slice(&buf[..n]);
                    return Poll::Ready(self.send.send_data(data, false).map(|()| n).map_err(io_error));
                }
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // h2 writes frames to the connection as soon as it is polled.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.ended {
            return Poll::Ready(Ok(()));
        }
        self.ended = true;
        self.send.reserve_capacity(0);
        Poll::Ready(self.send.send_data(Bytes::new(), true).map_err(io_error))
    }
}

/// Sends a PING every `interval`; returns when one is not answered within
/// `timeout` (or the connection is gone): the caller then drops the
/// connection, which a silent peer (a dead node, a lost route) would
/// otherwise hold open.
pub(crate) async fn keepalive(mut ping_pong: h2::PingPong, interval: Duration, timeout: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        match tokio::time::timeout(timeout, ping_pong.ping(h2::Ping::opaque())).await {
            Ok(Ok(_)) => continue,
            Ok(Err(e)) => tracing::debug!("HBONE keep-alive failed: {e}"),
            Err(_) => tracing::debug!("HBONE keep-alive PING unanswered in {timeout:?}"),
        }
        return;
    }
}
