use chrono::TimeZone as _;

use super::*;

fn utc(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn cron(expr: &str, zone: Option<&str>) -> Recurrence {
    Recurrence::cron(expr, zone, CatchUp::One).unwrap()
}

#[test]
fn five_fields_and_nicknames_parse_and_anything_else_is_refused_naming_the_field() {
    for ok in [
        "*/5 * * * *",
        "0 9 * * MON-FRI",
        "30 2 1 1 *",
        "@hourly",
        "@daily",
    ] {
        assert!(Recurrence::cron(ok, None, CatchUp::One).is_ok(), "{ok}");
    }
    for bad in [
        "* * * *",
        "0 * * * * *",
        "61 * * * *",
        "* 25 * * *",
        "* * * 13 *",
        "x y z w v",
        "",
        "0 0 31 2 *",
    ] {
        let e = Recurrence::cron(bad, None, CatchUp::One).unwrap_err();
        assert_eq!(e.field, "cron", "{bad}: {e}");
    }
    let e = Recurrence::cron("* * * * *", Some("Mars/Olympus"), CatchUp::One).unwrap_err();
    assert_eq!(e.field, "timezone");
    for ms in [0, 99, -5, 1_001] {
        let e = Recurrence::interval(ms, 1_000, CatchUp::One).unwrap_err();
        assert_eq!(e.field, "intervalMs", "{ms}");
    }
    assert!(Recurrence::interval(100, 1_000, CatchUp::None).is_ok());
}

#[test]
fn cron_ticks_in_utc_and_in_a_zone() {
    let r = cron("*/15 * * * *", None);
    assert_eq!(
        r.next_after(utc("2026-03-01T10:07:30Z")),
        Some(utc("2026-03-01T10:15:00Z"))
    );
    // strictly after: a tick is never its own successor
    assert_eq!(
        r.next_after(utc("2026-03-01T10:15:00Z")),
        Some(utc("2026-03-01T10:30:00Z"))
    );
    // 09:00 in Tokyo (UTC+9, no DST) is 00:00 UTC
    let r = cron("0 9 * * *", Some("Asia/Tokyo"));
    assert_eq!(
        r.next_after(utc("2026-03-01T10:00:00Z")),
        Some(utc("2026-03-02T00:00:00Z"))
    );
    assert_eq!(r.stored(), (None, Some("0 9 * * *"), Some("Asia/Tokyo")));
}

#[test]
fn a_daily_tick_in_the_spring_gap_fires_once_after_it_and_once_in_the_autumn_overlap() {
    // Europe/Berlin: 2026-03-29 02:00 CET jumps to 03:00 CEST; 2026-10-25
    // 03:00 CEST falls back to 02:00 CET
    let r = cron("30 2 * * *", Some("Europe/Berlin"));
    let berlin = chrono_tz::Europe::Berlin;
    let day_before = berlin
        .with_ymd_and_hms(2026, 3, 28, 2, 30, 0)
        .unwrap()
        .with_timezone(&Utc);
    let gap_day = r.next_after(day_before).unwrap();
    // 02:30 does not exist that day: the tick is the first instant after the
    // gap, 03:00 CEST = 01:00 UTC, still one tick that day
    assert_eq!(gap_day, utc("2026-03-29T01:00:00Z"));
    let after = r.next_after(gap_day).unwrap();
    assert_eq!(after, utc("2026-03-30T00:30:00Z"), "02:30 CEST");
    // 02:30 happens twice on 2026-10-25: the tick fires once
    let before = utc("2026-10-24T12:00:00Z");
    let first = r.next_after(before).unwrap();
    assert_eq!(
        first,
        utc("2026-10-25T00:30:00Z"),
        "02:30 CEST, the first one"
    );
    let second = r.next_after(first).unwrap();
    assert_eq!(
        second,
        utc("2026-10-26T01:30:00Z"),
        "02:30 CET the next day"
    );
    // 24 h after a UTC tick in a zone with DST is not always the next tick
    let hourly = cron("0 * * * *", Some("Europe/Berlin"));
    let t = utc("2026-10-25T00:00:00Z");
    assert_eq!(hourly.next_after(t), Some(utc("2026-10-25T01:00:00Z")));
}

#[test]
fn interval_ticks_are_counted_from_the_schedule_not_from_the_fire() {
    let r = Recurrence::interval(1_000, i64::MAX, CatchUp::One).unwrap();
    let armed = utc("2026-01-01T00:00:00.250Z");
    // a fire 300 ms late stands for its own tick; the next stays on the grid
    let d = r.due(armed, utc("2026-01-01T00:00:00.550Z")).unwrap();
    assert_eq!(d.fire_as, Some(armed));
    assert_eq!(d.next, utc("2026-01-01T00:00:01.250Z"));
    // exactly at the tick
    let d = r.due(armed, armed).unwrap();
    assert_eq!(d.fire_as, Some(armed));
    assert_eq!(d.next, utc("2026-01-01T00:00:01.250Z"));
}

#[test]
fn missed_ticks_fire_once_as_the_latest_or_not_at_all() {
    let armed = utc("2026-01-01T00:00:00Z");
    let now = utc("2026-01-01T00:00:05.500Z");
    let one = Recurrence::interval(1_000, i64::MAX, CatchUp::One).unwrap();
    let d = one.due(armed, now).unwrap();
    assert_eq!(d.fire_as, Some(utc("2026-01-01T00:00:05Z")));
    assert_eq!(d.next, utc("2026-01-01T00:00:06Z"));
    let none = Recurrence::interval(1_000, i64::MAX, CatchUp::None).unwrap();
    let d = none.due(armed, now).unwrap();
    assert_eq!(d.fire_as, None);
    assert_eq!(d.next, utc("2026-01-01T00:00:06Z"));
    // one tick passed, however late within its period: both fire it
    let late = utc("2026-01-01T00:00:00.900Z");
    assert_eq!(none.due(armed, late).unwrap().fire_as, Some(armed));

    let c = Recurrence::cron("*/10 * * * *", None, CatchUp::None).unwrap();
    let armed = utc("2026-01-01T00:10:00Z");
    let d = c.due(armed, utc("2026-01-01T00:45:00Z")).unwrap();
    assert_eq!(d.fire_as, None);
    assert_eq!(d.next, utc("2026-01-01T00:50:00Z"));
    let c = Recurrence::cron("*/10 * * * *", None, CatchUp::One).unwrap();
    let d = c.due(armed, utc("2026-01-01T00:45:00Z")).unwrap();
    assert_eq!(d.fire_as, Some(utc("2026-01-01T00:40:00Z")));
    // a first fire at delayMs is off the cron grid: the next is the grid's
    let off = utc("2026-01-01T00:03:17Z");
    let d = c.due(off, utc("2026-01-01T00:03:18Z")).unwrap();
    assert_eq!(d.fire_as, Some(off));
    assert_eq!(d.next, utc("2026-01-01T00:10:00Z"));
}

#[test]
fn fire_txns_differ_per_tick_and_fit_a_transaction_id() {
    let t = utc("2026-01-01T00:00:00Z");
    let a = fire_txn("nightly", t);
    assert_eq!(a, "nightly@2026-01-01T00:00:00.000000Z");
    assert_eq!(a, fire_txn("nightly", t), "a replayed tick is the same id");
    assert_ne!(a, fire_txn("nightly", t + Duration::milliseconds(100)));
    let long = "x".repeat(MAX_RECURRING_TXN_CHARS);
    assert_eq!(fire_txn(&long, t).chars().count(), 255);
}

#[test]
fn day_of_month_or_day_of_week_and_nicknames_as_in_vixie_cron() {
    // Monday 2026-03-02: "the 1st or a Monday" next is Monday the 9th
    let r = cron("0 0 1 * MON", None);
    assert_eq!(
        r.next_after(utc("2026-03-02T01:00:00Z")),
        Some(utc("2026-03-09T00:00:00Z"))
    );
    let r = cron("@weekly", None);
    assert_eq!(
        r.next_after(utc("2026-03-02T01:00:00Z")),
        Some(utc("2026-03-08T00:00:00Z")),
        "Sunday midnight"
    );
    for n in ["@hourly", "@daily", "@monthly", "@yearly"] {
        assert!(Recurrence::cron(n, None, CatchUp::One).is_ok(), "{n}");
    }
}
