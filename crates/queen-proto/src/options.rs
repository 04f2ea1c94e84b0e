//! The option set of a queue, as `/configure` takes and echoes it.

use serde::Serialize;
use serde_json::{Map, Value};

/// Every option of a queue with its effective value. `/configure` replaces the
/// whole set: an option missing from the request takes its default.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOptions {
    pub priority: i32,
    /// Lease duration for pops, in seconds (0 means 60 at pop time).
    pub lease_time: i32,
    /// Failed acks before a message goes to the DLQ.
    pub retry_limit: i32,
    /// Milliseconds a partition rests after a `failed` ack or an expired
    /// lease before its next delivery to that group (0: none).
    pub retry_delay: i32,
    /// Multiplier of `retry_delay` per failed delivery attempt (at least 1:
    /// 1 keeps the delay constant).
    pub retry_backoff: f64,
    /// Largest delay the backoff grows to, in milliseconds (0: no cap below
    /// [`MAX_RETRY_DELAY_MS`]).
    pub retry_delay_max: i32,
    pub max_size: i32,
    /// Seconds after which a message is not delivered any more (0: never);
    /// dead-lettered with `dead_letter_queue`, else counted as expired.
    pub ttl: i32,
    pub dead_letter_queue: bool,
    pub dlq_after_max_retries: bool,
    /// Seconds a message stays invisible after it was pushed.
    pub delayed_processing: i32,
    /// Seconds a partition must be quiet before it is delivered.
    pub window_buffer: i32,
    pub retention_seconds: i32,
    pub completed_retention_seconds: i32,
    pub retention_enabled: bool,
    pub encryption_enabled: bool,
    pub max_wait_time_seconds: i32,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            priority: 0,
            lease_time: 300,
            retry_limit: 3,
            retry_delay: 0,
            retry_backoff: 1.0,
            retry_delay_max: 0,
            max_size: 0,
            ttl: 0,
            dead_letter_queue: false,
            dlq_after_max_retries: false,
            delayed_processing: 0,
            window_buffer: 0,
            retention_seconds: 0,
            completed_retention_seconds: 0,
            retention_enabled: false,
            encryption_enabled: false,
            max_wait_time_seconds: 0,
        }
    }
}

// `retry_backoff` is finite (checked by `from_json`), so equality is total.
impl Eq for QueueOptions {}

/// The largest `retryDelay` and `retryDelayMax` (7 days, in ms); a backoff
/// without `retryDelayMax` stops growing there.
pub const MAX_RETRY_DELAY_MS: i32 = 7 * 24 * 3600 * 1000;

/// The largest `retryBackoff`.
pub const MAX_RETRY_BACKOFF: f64 = 100.0;

/// An option with a value of the wrong type or range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("options.{key} {problem}")]
pub struct OptionError {
    pub key: &'static str,
    pub problem: &'static str,
}

fn int(map: &Map<String, Value>, key: &'static str, default: i32) -> Result<i32, OptionError> {
    let bad = |problem| OptionError { key, problem };
    let n = match map.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i,
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => f as i64,
            _ => return Err(bad("must be an integer")),
        },
        Some(Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| bad("must be an integer"))?,
        Some(_) => return Err(bad("must be an integer")),
    };
    if n < 0 {
        return Err(bad("must not be negative"));
    }
    i32::try_from(n).map_err(|_| bad("is too large"))
}

/// An integer option of at most `max`.
fn bounded(
    map: &Map<String, Value>,
    key: &'static str,
    default: i32,
    max: i32,
    problem: &'static str,
) -> Result<i32, OptionError> {
    let n = int(map, key, default)?;
    if n > max {
        return Err(OptionError { key, problem });
    }
    Ok(n)
}

/// `retryBackoff`: a number from 1 to [`MAX_RETRY_BACKOFF`].
fn backoff(map: &Map<String, Value>, key: &'static str, default: f64) -> Result<f64, OptionError> {
    let bad = |problem| OptionError { key, problem };
    let b = match map.get(key) {
        None | Some(Value::Null) => return Ok(default),
        Some(Value::Number(n)) => n.as_f64().ok_or(bad("must be a number"))?,
        Some(Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| bad("must be a number"))?,
        Some(_) => return Err(bad("must be a number")),
    };
    if !b.is_finite() {
        return Err(bad("must be a number"));
    }
    if b < 1.0 {
        return Err(bad("must be at least 1"));
    }
    if b > MAX_RETRY_BACKOFF {
        return Err(bad("must be at most 100"));
    }
    Ok(b)
}

fn boolean(
    map: &Map<String, Value>,
    key: &'static str,
    default: bool,
) -> Result<bool, OptionError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" => Ok(false),
        Some(_) => Err(OptionError {
            key,
            problem: "must be a boolean",
        }),
    }
}

impl QueueOptions {
    /// Reads the options object of `/configure`; absent keys take their defaults
    /// and unknown keys are ignored.
    pub fn from_json(map: &Map<String, Value>) -> Result<Self, OptionError> {
        let d = Self::default();
        Ok(Self {
            priority: int(map, "priority", d.priority)?,
            lease_time: int(map, "leaseTime", d.lease_time)?,
            retry_limit: int(map, "retryLimit", d.retry_limit)?,
            retry_delay: bounded(
                map,
                "retryDelay",
                d.retry_delay,
                MAX_RETRY_DELAY_MS,
                "must be at most 604800000 (7 days)",
            )?,
            retry_backoff: backoff(map, "retryBackoff", d.retry_backoff)?,
            retry_delay_max: bounded(
                map,
                "retryDelayMax",
                d.retry_delay_max,
                MAX_RETRY_DELAY_MS,
                "must be at most 604800000 (7 days)",
            )?,
            max_size: int(map, "maxSize", d.max_size)?,
            ttl: int(map, "ttl", d.ttl)?,
            dead_letter_queue: boolean(map, "deadLetterQueue", d.dead_letter_queue)?,
            dlq_after_max_retries: boolean(map, "dlqAfterMaxRetries", d.dlq_after_max_retries)?,
            delayed_processing: int(map, "delayedProcessing", d.delayed_processing)?,
            window_buffer: int(map, "windowBuffer", d.window_buffer)?,
            retention_seconds: int(map, "retentionSeconds", d.retention_seconds)?,
            completed_retention_seconds: int(
                map,
                "completedRetentionSeconds",
                d.completed_retention_seconds,
            )?,
            retention_enabled: boolean(map, "retentionEnabled", d.retention_enabled)?,
            encryption_enabled: boolean(map, "encryptionEnabled", d.encryption_enabled)?,
            max_wait_time_seconds: int(map, "maxWaitTimeSeconds", d.max_wait_time_seconds)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_options_take_defaults_and_all_seventeen_are_echoed() {
        let v = json!({"leaseTime": 10, "unknown": 1});
        let o = QueueOptions::from_json(v.as_object().unwrap()).unwrap();
        assert_eq!(o.lease_time, 10);
        assert_eq!(o.retry_limit, 3);
        let echoed = serde_json::to_value(&o).unwrap();
        assert_eq!(echoed.as_object().unwrap().len(), 17);
        assert_eq!(echoed["retryBackoff"], json!(1.0));
        assert_eq!(echoed["retryDelayMax"], json!(0));
        assert_eq!(echoed["leaseTime"], json!(10));
        assert_eq!(echoed["retentionEnabled"], json!(false));
    }

    #[test]
    fn wrong_types_are_refused_by_name() {
        let v = json!({"retryLimit": "many"});
        let e = QueueOptions::from_json(v.as_object().unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "options.retryLimit must be an integer");
        let v = json!({"encryptionEnabled": 1});
        assert!(QueueOptions::from_json(v.as_object().unwrap()).is_err());
        let v = json!({"leaseTime": -1});
        assert!(QueueOptions::from_json(v.as_object().unwrap()).is_err());
        let v = json!({"leaseTime": "30"});
        assert_eq!(
            QueueOptions::from_json(v.as_object().unwrap())
                .unwrap()
                .lease_time,
            30
        );
    }

    #[test]
    fn retry_options_are_read_and_bounded_by_name() {
        let v = json!({"retryDelay": 500, "retryBackoff": 2.5, "retryDelayMax": "4000"});
        let o = QueueOptions::from_json(v.as_object().unwrap()).unwrap();
        assert_eq!(
            (o.retry_delay, o.retry_backoff, o.retry_delay_max),
            (500, 2.5, 4000)
        );
        for (body, said) in [
            (
                json!({"retryBackoff": 0.5}),
                "options.retryBackoff must be at least 1",
            ),
            (
                json!({"retryBackoff": "fast"}),
                "options.retryBackoff must be a number",
            ),
            (
                json!({"retryBackoff": true}),
                "options.retryBackoff must be a number",
            ),
            (
                json!({"retryBackoff": 1000}),
                "options.retryBackoff must be at most 100",
            ),
            (
                json!({"retryDelay": -1}),
                "options.retryDelay must not be negative",
            ),
            (
                json!({"retryDelay": 604_800_001}),
                "options.retryDelay must be at most 604800000 (7 days)",
            ),
            (
                json!({"retryDelayMax": 1.5}),
                "options.retryDelayMax must be an integer",
            ),
            (
                json!({"retryDelayMax": 1e12}),
                "options.retryDelayMax is too large",
            ),
        ] {
            let e = QueueOptions::from_json(body.as_object().unwrap()).unwrap_err();
            assert_eq!(e.to_string(), said, "{body}");
        }
    }
}
