//! Defaults and timing of pops: batch size, long-poll budget, where a new
//! consumer group starts, and the re-check intervals of parked long polls.

use std::time::Duration;

use super::defaults;
use super::env::{ConfigError, Reader};

/// Defaults and timing of pops.
#[derive(Debug, Clone)]
pub struct PopConfig {
    /// `DEFAULT_BATCH_SIZE`: messages per pop when the request names no `batch`.
    pub default_batch: u32,
    /// `DEFAULT_TIMEOUT`: long-poll budget when the request names no `timeout`.
    pub default_timeout: Duration,
    /// `DEFAULT_SUBSCRIPTION_MODE`: `""`/`all`, `new` or `new-only`.
    pub default_subscription_mode: SubscriptionMode,
    /// First re-check interval of a parked long poll.
    pub wait_initial_interval: Duration,
    /// Empty re-checks before the interval starts to grow.
    pub wait_backoff_threshold: u32,
    pub wait_backoff_multiplier: f64,
    /// Ceiling of the re-check interval: the longest a lost wake-up can cost.
    pub wait_max_interval: Duration,
}

/// Where a consumer group starts on first contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMode {
    All,
    New,
}

impl SubscriptionMode {
    /// Parses a mode; `new-only` is `new`, anything unknown is `all`.
    pub fn parse_lenient(s: &str) -> Self {
        match s.trim() {
            "new" | "new-only" => Self::New,
            _ => Self::All,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::New => "new",
        }
    }
}

/// `DEFAULT_SUBSCRIPTION_MODE`, strictly: unlike a request's mode, an unknown
/// value is an error.
fn read_subscription_mode(r: &Reader<'_>) -> Result<SubscriptionMode, ConfigError> {
    let mode = r.string(
        "DEFAULT_SUBSCRIPTION_MODE",
        defaults::DEFAULT_SUBSCRIPTION_MODE,
    );
    match mode.trim() {
        "" | "all" => Ok(SubscriptionMode::All),
        "new" | "new-only" => Ok(SubscriptionMode::New),
        other => Err(ConfigError::new(
            "DEFAULT_SUBSCRIPTION_MODE",
            other,
            "expected empty, all, new or new-only",
        )),
    }
}

pub(super) fn read_pop(r: &Reader<'_>) -> Result<PopConfig, ConfigError> {
    let default_batch: u32 = r.parsed("DEFAULT_BATCH_SIZE", defaults::DEFAULT_BATCH_SIZE)?;
    let multiplier: f64 = r.parsed(
        "POP_WAIT_BACKOFF_MULTIPLIER",
        defaults::POP_WAIT_BACKOFF_MULTIPLIER,
    )?;
    if !(1.0..=100.0).contains(&multiplier) {
        return Err(ConfigError::new(
            "POP_WAIT_BACKOFF_MULTIPLIER",
            multiplier.to_string(),
            "must be between 1 and 100",
        ));
    }
    Ok(PopConfig {
        default_batch: default_batch.max(1),
        default_timeout: r.millis("DEFAULT_TIMEOUT", defaults::DEFAULT_TIMEOUT_MS)?,
        default_subscription_mode: read_subscription_mode(r)?,
        wait_initial_interval: r.millis(
            "POP_WAIT_INITIAL_INTERVAL_MS",
            defaults::POP_WAIT_INITIAL_INTERVAL_MS,
        )?,
        wait_backoff_threshold: r.parsed(
            "POP_WAIT_BACKOFF_THRESHOLD",
            defaults::POP_WAIT_BACKOFF_THRESHOLD,
        )?,
        wait_backoff_multiplier: multiplier,
        wait_max_interval: r.millis(
            "POP_WAIT_MAX_INTERVAL_MS",
            defaults::POP_WAIT_MAX_INTERVAL_MS,
        )?,
    })
}
