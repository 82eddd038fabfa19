//! Access logs as JSON lines, off by default and switchable at run time.
//!
//! A worker never formats or writes a line: it checks one atomic flag, and when
//! logging is on hands a boxed [`AccessLogEntry`] to a bounded channel with
//! `try_send`. A dedicated `accesslog` thread (tokio here has no `fs` or stdout
//! support, and a slow disk must not stall a runtime) serializes and writes.
//! When the channel is full the entry is dropped and counted: a log that
//! cannot keep up must never add latency to traffic.
//!
//! Fields, a subset of Istio's default JSON access log (Envoy's names), limited
//! to what the data path knows; absent values are `null`, as in Envoy's JSON
//! format: `start_time` (RFC 3339, UTC, milliseconds), `method`, `path`,
//! `protocol` (`HTTP/1.1`, `HTTP/2`; null for TCP), `response_code` (0 for
//! TCP), `response_flags`, `bytes_received`, `bytes_sent`, `duration` (ms),
//! `upstream_service_time` (ms), `x_forwarded_for`, `user_agent`,
//! `request_id`, `authority`, `upstream_host`, `upstream_cluster`,
//! `route_name`, `downstream_local_address`, `downstream_remote_address`,
//! `requested_server_name`.

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use super::TelemetryError;
use super::labels::ResponseFlags;

/// One request or TCP connection, as logged.
#[derive(Clone, Debug, Serialize)]
pub struct AccessLogEntry {
    #[serde(serialize_with = "rfc3339")]
    pub start_time: SystemTime,
    pub method: Option<String>,
    pub path: Option<String>,
    pub protocol: Option<&'static str>,
    pub response_code: u16,
    #[serde(serialize_with = "display")]
    pub response_flags: ResponseFlags,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    #[serde(serialize_with = "millis")]
    pub duration: Duration,
    #[serde(serialize_with = "opt_millis")]
    pub upstream_service_time: Option<Duration>,
    pub x_forwarded_for: Option<String>,
    pub user_agent: Option<String>,
    pub request_id: Option<String>,
    pub authority: Option<String>,
    pub upstream_host: Option<SocketAddr>,
    pub upstream_cluster: Option<Arc<str>>,
    pub route_name: Option<Arc<str>>,
    pub downstream_local_address: Option<SocketAddr>,
    pub downstream_remote_address: Option<SocketAddr>,
    pub requested_server_name: Option<String>,
}

impl AccessLogEntry {
    /// An entry with only the start time set; the data path fills the rest.
    pub fn new(start_time: SystemTime) -> AccessLogEntry {
        AccessLogEntry {
            start_time,
            method: None,
            path: None,
            protocol: None,
            response_code: 0,
            response_flags: ResponseFlags::NONE,
            bytes_received: 0,
            bytes_sent: 0,
            duration: Duration::ZERO,
            upstream_service_time: None,
            x_forwarded_for: None,
            user_agent: None,
            request_id: None,
            authority: None,
            upstream_host: None,
            upstream_cluster: None,
            route_name: None,
            downstream_local_address: None,
            downstream_remote_address: None,
            requested_server_name: None,
        }
    }
}

fn rfc3339<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_rfc3339_millis(*t))
}
fn display<S: Serializer>(v: &ResponseFlags, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}
fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
fn opt_millis<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => millis(d, s),
        None => s.serialize_none(),
    }
}

/// `2023-11-14T22:13:20.000Z`, without a date crate: days to civil date by
/// Howard Hinnant's algorithm.
pub fn format_rfc3339_millis(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Where the lines go.
pub enum AccessLogSink {
    Stdout,
    /// Appended to; created if missing.
    File(PathBuf),
    /// Any writer (tests, or a caller's own pipe).
    Writer(Box<dyn Write + Send>),
}

pub struct AccessLogOptions {
    /// Whether logging starts on; admin can switch it later.
    pub enabled: bool,
    pub sink: AccessLogSink,
    /// Entries waiting for the writer before new ones are dropped.
    pub capacity: usize,
}

impl Default for AccessLogOptions {
    fn default() -> Self {
        AccessLogOptions { enabled: false, sink: AccessLogSink::Stdout, capacity: 1024 }
    }
}

#[derive(Debug, Default)]
pub(crate) struct AccessLogCounters {
    pub(crate) written: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) write_errors: AtomicU64,
}

/// The switch and the queue to the writer thread. Dropping it closes the
/// queue; the writer then writes what is left and exits.
pub struct AccessLog {
    enabled: AtomicBool,
    tx: SyncSender<Box<AccessLogEntry>>,
    counters: Arc<AccessLogCounters>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl AccessLog {
    /// Opens the sink and starts the writer thread.
    pub fn start(options: AccessLogOptions) -> Result<AccessLog, TelemetryError> {
        let out: Box<dyn Write + Send> = match options.sink {
            AccessLogSink::Stdout => Box::new(io::stdout()),
            AccessLogSink::File(path) => match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => Box::new(f),
                Err(source) => return Err(TelemetryError::OpenAccessLog { path, source }),
            },
            AccessLogSink::Writer(w) => w,
        };
        let (tx, rx) = mpsc::sync_channel(options.capacity.max(1));
        let counters = Arc::new(AccessLogCounters::default());
        let thread_counters = counters.clone();
        let writer = std::thread::Builder::new()
            .name("accesslog".into())
            .spawn(move || write_lines(rx, out, &thread_counters))
            .map_err(TelemetryError::Spawn)?;
        Ok(AccessLog { enabled: AtomicBool::new(options.enabled), tx, counters, writer: Mutex::new(Some(writer)) })
    }

    /// Checked by the data path before it builds an entry, so that logging
    /// off costs one atomic load.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Queues the entry if logging is on; never blocks. Returns whether it
    /// was queued.
    pub fn log(&self, entry: AccessLogEntry) -> bool {
        if !self.enabled() {
            return false;
        }
        match self.tx.try_send(Box::new(entry)) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// Entries dropped because the writer could not keep up.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Lines written so far.
    pub fn written(&self) -> u64 {
        self.counters.written.load(Ordering::Relaxed)
    }

    pub(crate) fn counters(&self) -> Arc<AccessLogCounters> {
        self.counters.clone()
    }

    /// Closes the queue and waits for the writer to flush; for shutdown and
    /// tests. Entries logged afterwards are dropped and counted.
    pub fn close(self) {
        let AccessLog { tx, writer, .. } = self;
        drop(tx);
        if let Some(h) = writer.into_inner().unwrap_or_else(PoisonError::into_inner) {
            let _ = h.join();
        }
    }
}

/// The writer thread: one JSON object per line, flushed whenever the queue
/// runs dry so that a quiet proxy's lines are not held back.
fn write_lines(rx: Receiver<Box<AccessLogEntry>>, out: Box<dyn Write + Send>, counters: &AccessLogCounters) {
    let mut out = BufWriter::new(out);
    let mut warned = false;
    let mut fail = |e: io::Error| {
        counters.write_errors.fetch_add(1, Ordering::Relaxed);
        if !warned {
            tracing::warn!(error = %e, "access log: write failed; further failures are only counted");
            warned = true;
        }
    };
    loop {
        let entry = match rx.try_recv() {
            Ok(e) => e,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                if let Err(e) = out.flush() {
                    fail(e);
                }
                match rx.recv() {
                    Ok(e) => e,
                    Err(_) => break,
                }
            }
        };
        let line = serde_json::to_writer(&mut out, &entry).map_err(io::Error::from).and_then(|()| out.write_all(b"\n"));
        match line {
            Ok(()) => {
                counters.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => fail(e),
        }
    }
    if let Err(e) = out.flush() {
        fail(e);
    }
}
