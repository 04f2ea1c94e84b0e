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
    /// How pops that ask for it (`autopilot=true`) are sized.
    pub autopilot: AutopilotConfig,
}

/// `QUEEN_POP_AUTOPILOT*`: the pop autopilot (`broker/autopilot.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutopilotConfig {
    pub mode: AutopilotMode,
    /// `QUEEN_POP_AUTOPILOT_BATCH`: the batch of a lane with no history, and the least it chooses.
    pub batch: u32,
    /// `QUEEN_POP_AUTOPILOT_MAX_BATCH`: the most it chooses.
    pub max_batch: u32,
    /// `QUEEN_POP_AUTOPILOT_DRAIN_MS`: a busy lane's batch is what it delivers in this long.
    pub drain: Duration,
}

/// `QUEEN_POP_AUTOPILOT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutopilotMode {
    /// Sizes the knobs a pop left unset and says so in the answer.
    On,
    /// Decides and counts, but serves the defaults and echoes nothing.
    Shadow,
    /// Ignores `autopilot=true`.
    Off,
}

impl AutopilotMode {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "true" | "1" | "yes" => Some(Self::On),
            "shadow" | "dry-run" | "dryrun" => Some(Self::Shadow),
            "off" | "false" | "0" | "no" => Some(Self::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Shadow => "shadow",
            Self::Off => "off",
        }
    }
}

fn read_autopilot(r: &Reader<'_>) -> Result<AutopilotConfig, ConfigError> {
    let raw = r.string("QUEEN_POP_AUTOPILOT", defaults::QUEEN_POP_AUTOPILOT);
    let mode = AutopilotMode::parse(&raw).ok_or_else(|| {
        ConfigError::new(
            "QUEEN_POP_AUTOPILOT",
            raw.clone(),
            "expected on, shadow or off",
        )
    })?;
    let batch: u32 = r.parsed(
        "QUEEN_POP_AUTOPILOT_BATCH",
        defaults::QUEEN_POP_AUTOPILOT_BATCH,
    )?;
    if !(1..=10_000).contains(&batch) {
        return Err(ConfigError::new(
            "QUEEN_POP_AUTOPILOT_BATCH",
            batch.to_string(),
            "must be between 1 and 10000",
        ));
    }
    let max_batch: u32 = r.parsed(
        "QUEEN_POP_AUTOPILOT_MAX_BATCH",
        defaults::QUEEN_POP_AUTOPILOT_MAX_BATCH.max(batch),
    )?;
    if !(batch..=10_000).contains(&max_batch) {
        return Err(ConfigError::new(
            "QUEEN_POP_AUTOPILOT_MAX_BATCH",
            max_batch.to_string(),
            "must be between QUEEN_POP_AUTOPILOT_BATCH and 10000",
        ));
    }
    Ok(AutopilotConfig {
        mode,
        batch,
        max_batch,
        drain: r.millis(
            "QUEEN_POP_AUTOPILOT_DRAIN_MS",
            defaults::QUEEN_POP_AUTOPILOT_DRAIN_MS,
        )?,
    })
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
        autopilot: read_autopilot(r)?,
    })
}
