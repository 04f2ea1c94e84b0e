//! The disk spool that takes pushes while PostgreSQL is away (`FILE_BUFFER_*`,
//! http-api.md sections 6.4 and 7): its directory, replay cadence and limits.

use std::path::PathBuf;
use std::time::Duration;

use super::defaults;
use super::env::{at_least_one, ConfigError, Reader};

/// The disk spool (`FILE_BUFFER_*`, http-api.md §6.4 and §7).
#[derive(Debug, Clone)]
pub struct SpoolConfig {
    /// `FILE_BUFFER_DIR`: this broker's own directory.
    pub dir: PathBuf,
    /// `FILE_BUFFER_FLUSH_MS`: how often the drainer looks for spooled records.
    pub flush_interval: Duration,
    /// `FILE_BUFFER_MAX_BATCH`: records replayed per PostgreSQL call.
    pub max_batch: usize,
    /// `FILE_BUFFER_EVENTS_PER_FILE`: records per segment file before it is sealed.
    pub events_per_file: u64,
    /// `FILE_BUFFER_MAX_BYTES`: size limit of the spool; past it pushes get 503.
    pub max_bytes: u64,
}

/// The platform state directory: `$XDG_STATE_HOME/queen/buffers`, else
/// `/var/lib/queen/buffers` for root, else `$HOME/.local/state/queen/buffers`.
fn default_spool_dir(r: &Reader<'_>) -> PathBuf {
    use std::os::unix::fs::MetadataExt as _;
    if let Some(state) = r.raw("XDG_STATE_HOME") {
        return PathBuf::from(state).join("queen/buffers");
    }
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    match r.raw("HOME") {
        Some(home) if !root => PathBuf::from(home).join(".local/state/queen/buffers"),
        _ => PathBuf::from(defaults::FILE_BUFFER_DIR_SYSTEM),
    }
}

pub(super) fn read_spool(r: &Reader<'_>) -> Result<SpoolConfig, ConfigError> {
    let default_dir = default_spool_dir(r);
    Ok(SpoolConfig {
        dir: r.raw("FILE_BUFFER_DIR").map_or(default_dir, PathBuf::from),
        flush_interval: r
            .millis("FILE_BUFFER_FLUSH_MS", defaults::FILE_BUFFER_FLUSH_MS)?
            .max(Duration::from_millis(1)),
        max_batch: at_least_one(
            "FILE_BUFFER_MAX_BATCH",
            r.parsed("FILE_BUFFER_MAX_BATCH", defaults::FILE_BUFFER_MAX_BATCH)?,
        )? as usize,
        events_per_file: at_least_one(
            "FILE_BUFFER_EVENTS_PER_FILE",
            r.parsed(
                "FILE_BUFFER_EVENTS_PER_FILE",
                defaults::FILE_BUFFER_EVENTS_PER_FILE,
            )?,
        )?,
        max_bytes: at_least_one(
            "FILE_BUFFER_MAX_BYTES",
            r.parsed("FILE_BUFFER_MAX_BYTES", defaults::FILE_BUFFER_MAX_BYTES)?,
        )?,
    })
}
