//! Timestamp formats of the wire: microseconds on popped messages, milliseconds elsewhere.

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};

/// Formats `YYYY-MM-DDTHH:MM:SS.ffffffZ` (popped messages' `createdAt`).
pub fn format_micros(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Formats `YYYY-MM-DDTHH:MM:SS.mmmZ` (every other timestamp).
pub fn format_millis(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an incoming timestamp: RFC 3339 (`2025-01-31T10:00:00Z`, with offset or
/// fraction), a date-time without zone (taken as UTC, `T` or space separated),
/// or a bare date (midnight UTC).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, fmt) {
            return Some(t.and_utc());
        }
    }
    if let Ok(t) = DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f%#z") {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
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

    #[test]
    fn timestamps_parse_in_the_usual_shapes() {
        let t = Utc.with_ymd_and_hms(2025, 1, 31, 10, 0, 0).unwrap();
        assert_eq!(parse_timestamp("2025-01-31T10:00:00Z"), Some(t));
        assert_eq!(parse_timestamp("2025-01-31T11:00:00+01:00"), Some(t));
        assert_eq!(parse_timestamp("2025-01-31T10:00:00.000"), Some(t));
        assert_eq!(parse_timestamp("2025-01-31 10:00:00"), Some(t));
        assert_eq!(
            parse_timestamp("2025-01-31"),
            Some(Utc.with_ymd_and_hms(2025, 1, 31, 0, 0, 0).unwrap())
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }
}
