//! Structured logs through `tracing`, with a filter that the admin endpoint
//! can change at run time (`/logging?level=`).

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error("invalid log level {directives:?}: {reason}")]
    InvalidLevel { directives: String, reason: String },
    #[error("cannot change the log level: {0}")]
    Reload(#[from] reload::Error),
    #[error("a global logger is already installed")]
    AlreadyInstalled,
}

/// Changes the active log filter.
#[derive(Clone)]
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
}

impl std::fmt::Debug for LogControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogControl")
    }
}

fn filter(directives: &str) -> Result<EnvFilter, LoggingError> {
    EnvFilter::builder()
        .parse(directives)
        .map_err(|e| LoggingError::InvalidLevel { directives: directives.to_string(), reason: e.to_string() })
}

/// Installs the global subscriber: compact text lines on stderr.
pub fn init(directives: &str) -> Result<LogControl, LoggingError> {
    let (layer, handle) = reload::Layer::new(filter(directives)?);
    tracing_subscriber::registry()
        .with(layer)
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .try_init()
        .map_err(|_| LoggingError::AlreadyInstalled)?;
    Ok(LogControl { handle })
}

impl LogControl {
    /// Replaces the filter, e.g. `debug` or `info,meshperf_proxy::xds=debug`.
    pub fn set(&self, directives: &str) -> Result<(), LoggingError> {
        let f = filter(directives)?;
        self.handle.reload(f)?;
        Ok(())
    }

    /// The active filter, as text.
    pub fn current(&self) -> String {
        self.handle.with_current(|f| f.to_string()).unwrap_or_default()
    }
}
