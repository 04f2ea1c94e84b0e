//! Logging: `LOG_LEVEL` (or `RUST_LOG` when set), text or JSON lines.
//!
//! Text lines are coloured only on a terminal: escape codes in a log file or
//! a collector are noise, and writing them is most of the cost of the
//! request span's fields (`http.request`, one per request).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Safe to call twice (tests): the second call is a no-op.
pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("{level},tokio_postgres=warn,refinery_core=warn"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stdout().is_terminal());
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
