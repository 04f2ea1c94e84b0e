//! Timestamp formats of the wire: microseconds on popped messages, milliseconds elsewhere.

use chrono::{DateTime, SecondsFormat, Utc};

/// Formats `YYYY-MM-DDTHH:MM:SS.ffffffZ` (popped messages' `createdAt`).
pub fn format_micros(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Formats `YYYY-MM-DDTHH:MM:SS.mmmZ` (every other timestamp).
pub fn format_millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn formats_have_fixed_precision() {
        let t = Utc.timestamp_opt(1_700_000_000, 120_000).unwrap();
        assert_eq!(format_micros(t), "2023-11-14T22:13:20.000120Z");
        assert_eq!(format_millis(t), "2023-11-14T22:13:20.000Z");
    }
}
