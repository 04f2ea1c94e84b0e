//! The broker process itself: its replica name, logging, the async runtime's
//! threads and the payload encryption key. (Where it listens and how large a
//! request may be are plain parsed values, read in the parent module.)

use std::num::NonZeroUsize;

use super::defaults;
use super::env::{ConfigError, Reader};

/// `QUEEN_SERVER_ID`, else the reference's `WORKER_ID`, else `HOSTNAME`.
pub(super) fn read_server_id(r: &Reader<'_>) -> String {
    r.raw("QUEEN_SERVER_ID")
        .or_else(|| r.raw("WORKER_ID"))
        .or_else(|| r.raw("HOSTNAME"))
        .unwrap_or_else(|| defaults::SERVER_ID.to_owned())
}

/// `TOKIO_WORKER_THREADS`. The runtime reads it too and panics on a bad
/// value, so it is checked here first.
pub(super) fn read_worker_threads(r: &Reader<'_>) -> Result<Option<NonZeroUsize>, ConfigError> {
    r.optional("TOKIO_WORKER_THREADS")
}

/// `LOG_FORMAT`: true for `json`.
pub(super) fn read_log_format_json(r: &Reader<'_>) -> Result<bool, ConfigError> {
    match r.string("LOG_FORMAT", defaults::LOG_FORMAT).as_str() {
        "text" => Ok(false),
        "json" => Ok(true),
        other => Err(ConfigError::new(
            "LOG_FORMAT",
            other,
            "expected text or json",
        )),
    }
}

/// `LOG_LEVEL`, lowercased.
pub(super) fn read_log_level(r: &Reader<'_>) -> Result<String, ConfigError> {
    let log_level = r.string("LOG_LEVEL", defaults::LOG_LEVEL).to_lowercase();
    if ["trace", "debug", "info", "warn", "error"].contains(&log_level.as_str()) {
        Ok(log_level)
    } else {
        Err(ConfigError::new(
            "LOG_LEVEL",
            log_level,
            "expected trace, debug, info, warn or error",
        ))
    }
}

/// `QUEEN_ENCRYPTION_KEY`: 64 hex characters, an AES-256 key. The error never
/// shows the value.
pub(super) fn read_encryption_key(r: &Reader<'_>) -> Result<Option<[u8; 32]>, ConfigError> {
    let Some(hex_key) = r.raw("QUEEN_ENCRYPTION_KEY") else {
        return Ok(None);
    };
    hex::decode(hex_key.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .map(Some)
        .ok_or_else(|| {
            ConfigError::new(
                "QUEEN_ENCRYPTION_KEY",
                "<redacted>",
                "must be 64 hex characters (a 32-byte AES-256 key)",
            )
        })
}
