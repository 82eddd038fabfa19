//! Body wrappers: one counts the bytes of a client's request body as it is
//! forwarded; the other reports a finished request to the observer when the
//! response body is done (or dropped because the client went away), which is
//! the moment Istio's metrics are recorded.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};

use super::upstream::ProxyBody;
use super::{RequestInfo, RequestObserver};

/// Counts data bytes into a shared counter.
pub struct Counted {
    inner: ProxyBody,
    count: Arc<AtomicU64>,
}

impl Counted {
    pub fn boxed(inner: ProxyBody, count: Arc<AtomicU64>) -> ProxyBody {
        Counted { inner, count }.boxed()
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        polled
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reports the request once, when dropped: hyper drops the response body
/// after its last frame is written or when the connection ends.
pub struct Observed {
    inner: ProxyBody,
    sent: u64,
    request_bytes: Arc<AtomicU64>,
    start: std::time::Instant,
    report: Option<(Arc<dyn RequestObserver>, RequestInfo)>,
}

impl Observed {
    pub fn boxed(
        inner: ProxyBody,
        observer: Arc<dyn RequestObserver>,
        info: RequestInfo,
        request_bytes: Arc<AtomicU64>,
        start: std::time::Instant,
    ) -> ProxyBody {
        Observed { inner, sent: 0, request_bytes, start, report: Some((observer, info)) }.boxed()
    }
}

impl Body for Observed {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            self.sent += data.len() as u64;
        }
        polled
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Some((observer, mut info)) = self.report.take() {
            info.response_bytes = self.sent;
            info.request_bytes = self.request_bytes.load(Ordering::Relaxed);
            info.duration = self.start.elapsed();
            observer.on_request(info);
        }
    }
}
