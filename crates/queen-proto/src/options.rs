//! The option set of a queue, as `/configure` takes and echoes it.

use serde::Serialize;
use serde_json::{Map, Value};

/// Every option of a queue with its effective value. `/configure` replaces the
/// whole set: an option missing from the request takes its default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOptions {
    pub priority: i32,
    /// Lease duration for pops, in seconds (0 means 60 at pop time).
    pub lease_time: i32,
    /// Failed acks before a message goes to the DLQ.
    pub retry_limit: i32,
    pub retry_delay: i32,
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
            retry_delay: int(map, "retryDelay", d.retry_delay)?,
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
    fn absent_options_take_defaults_and_all_fifteen_are_echoed() {
        let v = json!({"leaseTime": 10, "unknown": 1});
        let o = QueueOptions::from_json(v.as_object().unwrap()).unwrap();
        assert_eq!(o.lease_time, 10);
        assert_eq!(o.retry_limit, 3);
        let echoed = serde_json::to_value(&o).unwrap();
        assert_eq!(echoed.as_object().unwrap().len(), 15);
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
}
