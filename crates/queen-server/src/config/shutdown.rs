//! How the broker stops on SIGTERM or SIGINT (`SHUTDOWN_*`): how long it keeps
//! serving while `/health` tells the load balancer it is draining, and by when
//! it has exited. docs/operations.md ("Stopping a broker") tells the sequence.

use std::time::Duration;

use super::defaults;
use super::env::{ConfigError, Reader};

/// The graceful stop's two durations, both counted from the signal.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownConfig {
    /// How long the broker keeps accepting and serving after the signal, with
    /// `/health` answering 503 `draining`, before it stops accepting.
    pub drain: Duration,
    /// By when the process has exited: requests still in flight then are cut.
    pub timeout: Duration,
}

pub(super) fn read_shutdown(r: &Reader<'_>) -> Result<ShutdownConfig, ConfigError> {
    let drain = r.millis("SHUTDOWN_DRAIN_MS", defaults::SHUTDOWN_DRAIN_MS)?;
    let timeout = r.millis("SHUTDOWN_TIMEOUT_MS", defaults::SHUTDOWN_TIMEOUT_MS)?;
    if timeout <= drain {
        return Err(ConfigError::new(
            "SHUTDOWN_TIMEOUT_MS",
            timeout.as_millis().to_string(),
            "must be longer than SHUTDOWN_DRAIN_MS (requests in flight need time after the drain)",
        ));
    }
    Ok(ShutdownConfig { drain, timeout })
}
