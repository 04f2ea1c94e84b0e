//! Times on the command line: `now`, `15m ago`, `2h30m ago`, `in 10m`,
//! RFC 3339 (`2026-05-01T08:00:00Z`) or a date (`2026-05-01`, midnight UTC).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

/// Parses a time as the options `--from`, `--to`, `--at` take it.
pub fn parse_at(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if let Some(ago) = t.strip_suffix("ago") {
        return Ok(now - signed(duration(ago)?)?);
    }
    if let Some(ahead) = t.strip_prefix("in ") {
        return Ok(now + signed(duration(ahead)?)?);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(t) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        if let Some(midnight) = day.and_hms_opt(0, 0, 0) {
            return Ok(midnight.and_utc());
        }
    }
    Err(format!(
        "{text:?} is not a time: give now, a duration and ago (15m ago, 2h30m ago), \
         in and a duration (in 10m), RFC 3339 (2026-05-01T08:00:00Z) or a date (2026-05-01)"
    ))
}

/// A duration such as `15m`, `1h 30m`, `90s`, `2days`.
pub fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!(
            "{:?} is not a duration ({e}); e.g. 30s, 15m, 2h30m, 7d",
            text.trim()
        )
    })
}

fn signed(d: Duration) -> Result<chrono::Duration, String> {
    chrono::Duration::from_std(d).map_err(|_| "the duration is too long".to_owned())
}

/// The time as the broker takes it: RFC 3339 in UTC with milliseconds.
pub fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// clap value parser: a time as RFC 3339 text (relative forms resolved now).
pub fn time_arg(text: &str) -> Result<String, String> {
    parse_at(text, Utc::now()).map(rfc3339)
}

/// clap value parser: a duration in whole milliseconds.
pub fn millis_arg(text: &str) -> Result<u64, String> {
    let d = duration(text)?;
    u64::try_from(d.as_millis()).map_err(|_| "the duration is too long".to_owned())
}

/// clap value parser: whole seconds, plain (`30`) or as a duration (`5m`).
pub fn seconds_arg(text: &str) -> Result<u64, String> {
    if let Ok(n) = text.trim().parse::<u64>() {
        return Ok(n);
    }
    let d = duration(text)?;
    Ok(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn relative_and_absolute_times() {
        let now = at("2026-05-01T12:00:00Z");
        assert_eq!(parse_at("now", now).unwrap(), now);
        assert_eq!(
            parse_at("15m ago", now).unwrap(),
            at("2026-05-01T11:45:00Z")
        );
        assert_eq!(
            parse_at("2h30m ago", now).unwrap(),
            at("2026-05-01T09:30:00Z")
        );
        assert_eq!(parse_at("1d ago", now).unwrap(), at("2026-04-30T12:00:00Z"));
        assert_eq!(parse_at("in 10m", now).unwrap(), at("2026-05-01T12:10:00Z"));
        assert_eq!(
            parse_at("2026-04-01T08:00:00+02:00", now).unwrap(),
            at("2026-04-01T06:00:00Z")
        );
        assert_eq!(
            parse_at("2026-04-01", now).unwrap(),
            at("2026-04-01T00:00:00Z")
        );
        assert!(parse_at("yesterday-ish", now).is_err());
        assert!(parse_at("15 parsecs ago", now).is_err());
        assert_eq!(
            rfc3339(at("2026-05-01T11:45:00Z")),
            "2026-05-01T11:45:00.000Z"
        );
    }

    #[test]
    fn durations_in_milliseconds() {
        assert_eq!(millis_arg("1h").unwrap(), 3_600_000);
        assert_eq!(millis_arg("250ms").unwrap(), 250);
        assert!(millis_arg("soon").is_err());
        assert_eq!(seconds_arg("30").unwrap(), 30);
        assert_eq!(seconds_arg("2m").unwrap(), 120);
        assert_eq!(seconds_arg("1500ms").unwrap(), 2);
    }
}
