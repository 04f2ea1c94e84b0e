//! What one client may ask of the HTTP listener (`HTTP_*`, `MAX_*`):
//! deadlines for reading a request, a cap on connections, and the sizes of
//! what one request may carry. docs/operations.md ("Limits") explains them.

use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// Limits of the HTTP listener and of one request.
#[derive(Debug, Clone)]
pub struct LimitsConfig {
    /// Total time for a request head, from the connection's opening (its first
    /// request) or from the first byte of a later request, to its last header line.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may stay silent after an answer.
    pub idle_timeout: Duration,
    /// Total time for reading a request body once its head is in.
    pub body_timeout: Duration,
    /// Open connections at most; beyond, a new connection gets a 503 and is closed.
    pub max_connections: usize,
    /// Items of one `/push` at most.
    pub max_push_items: usize,
    /// Operations of one `/transaction` at most.
    pub max_transaction_operations: usize,
    /// Nesting depth of a pushed payload at most.
    pub max_payload_depth: usize,
    /// How often freed memory is given back to the system (`None`: never).
    pub memory_trim_interval: Option<Duration>,
}

pub(super) fn read_limits(r: &Reader<'_>) -> Result<LimitsConfig, ConfigError> {
    let ms = |var, default| -> Result<Duration, ConfigError> {
        let d = r.millis(var, default)?;
        if d.is_zero() {
            return Err(ConfigError::new(var, "0", "must be at least 1 ms"));
        }
        Ok(d)
    };
    Ok(LimitsConfig {
        header_timeout: ms("HTTP_HEADER_TIMEOUT_MS", defaults::HTTP_HEADER_TIMEOUT_MS)?,
        idle_timeout: ms("HTTP_IDLE_TIMEOUT_MS", defaults::HTTP_IDLE_TIMEOUT_MS)?,
        body_timeout: ms("HTTP_BODY_TIMEOUT_MS", defaults::HTTP_BODY_TIMEOUT_MS)?,
        max_connections: at_least_one(
            "HTTP_MAX_CONNECTIONS",
            r.parsed("HTTP_MAX_CONNECTIONS", defaults::HTTP_MAX_CONNECTIONS)?,
        )?,
        max_push_items: at_least_one(
            "MAX_PUSH_ITEMS",
            r.parsed("MAX_PUSH_ITEMS", defaults::MAX_PUSH_ITEMS)?,
        )?,
        max_transaction_operations: at_least_one(
            "MAX_TRANSACTION_OPERATIONS",
            r.parsed(
                "MAX_TRANSACTION_OPERATIONS",
                defaults::MAX_TRANSACTION_OPERATIONS,
            )?,
        )?,
        max_payload_depth: at_least_one(
            "MAX_PAYLOAD_DEPTH",
            r.parsed("MAX_PAYLOAD_DEPTH", defaults::MAX_PAYLOAD_DEPTH)?,
        )?,
        memory_trim_interval: Some(
            r.millis("MEMORY_TRIM_INTERVAL_MS", defaults::MEMORY_TRIM_INTERVAL_MS)?,
        )
        .filter(|d| !d.is_zero()),
    })
}
