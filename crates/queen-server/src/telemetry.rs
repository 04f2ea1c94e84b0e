//! Logging: `LOG_LEVEL` (or `RUST_LOG` when set), text or JSON lines.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Safe to call twice (tests): the second call is a no-op.
pub fn init(level: &str, json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!("{level},tokio_postgres=warn,refinery_core=warn"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
