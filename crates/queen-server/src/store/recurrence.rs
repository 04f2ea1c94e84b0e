//! The schedules of recurring timers: an interval or a five-field cron
//! expression (UTC or a named IANA time zone), the tick a due fire stands
//! for, and the tick after it.
//!
//! Ticks are counted from the schedule, never from the last fire: an
//! interval timer's ticks are `first + k · interval` (the first tick at
//! `delayMs`, else one interval after the schedule), a cron timer's are the
//! expression's occurrences (after a first fire at `delayMs` when one was
//! given). A late sweep therefore never shifts the grid. When a sweep finds
//! more than one tick of a timer passed (no broker fired it for a whole
//! period), `catchUp` decides: `one` fires once, as the latest passed tick;
//! `none` fires none of them. Either way the timer re-arms at the first tick
//! after now. Pure logic, no I/O: the sweep (`timer_fire.rs`) hands in the
//! database clock.

use std::str::FromStr as _;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

/// Shortest interval: below it a timer would keep the sweeper busy for little use.
pub const MIN_INTERVAL_MS: i64 = 100;

/// What a sweep does about ticks that passed while nobody fired them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatchUp {
    /// Fires once, as the latest passed tick.
    One,
    /// Fires none of them.
    None,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::One => "one",
            Self::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "one" => Some(Self::One),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// When a recurring timer ticks.
#[derive(Debug, Clone)]
pub enum Every {
    Interval {
        ms: i64,
    },
    /// The parsed expression is boxed: it is half a kilobyte.
    Cron {
        expr: String,
        zone: Tz,
        cron: Box<Cron>,
    },
}

/// A recurring timer's schedule and catch-up rule.
#[derive(Debug, Clone)]
pub struct Recurrence {
    pub every: Every,
    pub catch_up: CatchUp,
}

/// Why a schedule was refused; `field` is the wire name of the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RecurrenceError {
    pub field: &'static str,
    pub message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> RecurrenceError {
    RecurrenceError {
        field,
        message: message.into(),
    }
}

/// What a due recurring timer does now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueTick {
    /// The tick this fire stands for (`None`: missed ticks skipped, no fire).
    pub fire_as: Option<DateTime<Utc>>,
    /// The first tick after now, where the timer re-arms.
    pub next: DateTime<Utc>,
}

impl Recurrence {
    /// An interval of `ms` milliseconds, at least [`MIN_INTERVAL_MS`], at most `max_ms`.
    pub fn interval(ms: i64, max_ms: i64, catch_up: CatchUp) -> Result<Self, RecurrenceError> {
        if !(MIN_INTERVAL_MS..=max_ms).contains(&ms) {
            return Err(refuse(
                "intervalMs",
                format!("must be an integer from {MIN_INTERVAL_MS} to {max_ms}"),
            ));
        }
        Ok(Self {
            every: Every::Interval { ms },
            catch_up,
        })
    }

    /// A five-field cron expression (minute hour day-of-month month
    /// day-of-week, or an `@hourly`-style nickname) in `zone` (an IANA name;
    /// UTC when absent). An expression that never occurs is refused.
    pub fn cron(
        expr: &str,
        zone: Option<&str>,
        catch_up: CatchUp,
    ) -> Result<Self, RecurrenceError> {
        let zone = match zone {
            None => Tz::UTC,
            Some(z) => Tz::from_str(z)
                .map_err(|_| refuse("timezone", format!("unknown IANA time zone {z:?}")))?,
        };
        let fields = expr.split_whitespace().count();
        if !expr.trim_start().starts_with('@') && fields != 5 {
            return Err(refuse(
                "cron",
                format!("must have five fields (minute hour day month weekday), not {fields}"),
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| refuse("cron", format!("invalid expression {expr:?}: {e}")))?;
        let r = Self {
            every: Every::Cron {
                expr: expr.to_owned(),
                zone,
                cron: Box::new(cron),
            },
            catch_up,
        };
        if r.next_after(Utc::now()).is_none() {
            return Err(refuse("cron", format!("{expr:?} never occurs")));
        }
        Ok(r)
    }

    /// Rebuilds a stored schedule (the sweep, peek and list).
    pub fn from_stored(
        interval_ms: Option<i64>,
        cron: Option<&str>,
        timezone: Option<&str>,
        catch_up: Option<&str>,
    ) -> Result<Option<Self>, RecurrenceError> {
        let catch_up = catch_up.and_then(CatchUp::parse).unwrap_or(CatchUp::One);
        match (interval_ms, cron) {
            (Some(ms), _) => Self::interval(ms, i64::MAX, catch_up).map(Some),
            (None, Some(expr)) => Self::cron(expr, timezone, catch_up).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The first tick strictly after `t`; `None` when there is none (a cron
    /// expression past the parser's search horizon).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.every {
            Every::Interval { ms } => Some(t + Duration::milliseconds(*ms)),
            Every::Cron { zone, cron, .. } => cron
                .find_next_occurrence(&t.with_timezone(zone), false)
                .ok()
                .map(|n| n.with_timezone(&Utc)),
        }
    }

    /// The latest tick at or before `now`, counted from `armed` (itself a
    /// tick at or before `now`).
    fn latest_passed(&self, armed: DateTime<Utc>, now: DateTime<Utc>) -> DateTime<Utc> {
        match &self.every {
            Every::Interval { ms } => {
                let step = ms * 1000;
                let passed = (now - armed).num_microseconds().unwrap_or(i64::MAX) / step;
                armed + Duration::microseconds(passed * step)
            }
            Every::Cron { zone, cron, .. } => cron
                .find_previous_occurrence(&now.with_timezone(zone), true)
                .ok()
                .map(|p| p.with_timezone(&Utc))
                .filter(|p| *p > armed)
                .unwrap_or(armed),
        }
    }

    /// What a sweep at `now` does with a timer armed for the tick `armed`
    /// (`armed <= now`): the module doc's rule. `None` when no tick follows.
    pub fn due(&self, armed: DateTime<Utc>, now: DateTime<Utc>) -> Option<DueTick> {
        let latest = self.latest_passed(armed, now.max(armed));
        let fire_as = match self.catch_up {
            CatchUp::One => Some(latest),
            CatchUp::None => (latest == armed).then_some(armed),
        };
        let next = self.next_after(latest)?;
        Some(DueTick { fire_as, next })
    }

    /// The stored form: (interval_ms, cron, timezone).
    pub fn stored(&self) -> (Option<i64>, Option<&str>, Option<&str>) {
        match &self.every {
            Every::Interval { ms } => (Some(*ms), None, None),
            Every::Cron { expr, zone, .. } => (None, Some(expr), Some(zone.name())),
        }
    }
}

/// The transactionId of the fire of `tick`: the timer's txn, `@`, and the
/// tick's time with six fractional digits. A fire replayed for the same tick
/// carries the same id (a duplicate); the next tick's differs.
pub fn fire_txn(txn: &str, tick: DateTime<Utc>) -> String {
    format!("{txn}@{}", queen_proto::time::format_micros(tick))
}

/// Longest txn of a recurring timer: the suffix of [`fire_txn`] (28
/// characters) must fit in a transactionId of 255.
pub const MAX_RECURRING_TXN_CHARS: usize = 255 - 28;

#[cfg(test)]
mod tests;
