//! Whether PostgreSQL is considered down, with one log line per transition.
//!
//! A push that fails with a connection-class error or a timeout marks the
//! database down at once: later pushes go straight to the spool without waiting
//! for a connection. The drainer's health probe marks it up again.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug, Default)]
pub struct Outage {
    down: AtomicBool,
    since: Mutex<Option<Instant>>,
}

impl Outage {
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// Marks the database down; logs one WARN if it was up. Returns whether it was up.
    pub fn mark_down(&self, error: &dyn Display) -> bool {
        if self.down.swap(true, Ordering::AcqRel) {
            return false;
        }
        *self.since.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        tracing::warn!(
            error = %error,
            "PostgreSQL unreachable: pushes go to the disk spool until it is back"
        );
        true
    }

    /// Marks the database up; logs one INFO if it was down. Returns whether it was down.
    pub fn mark_up(&self, spooled_records: u64) -> bool {
        if !self.down.swap(false, Ordering::AcqRel) {
            return false;
        }
        let since = self.since.lock().unwrap_or_else(|e| e.into_inner()).take();
        tracing::info!(
            outage_ms = since.map_or(0, |s| s.elapsed().as_millis() as u64),
            spooled_records,
            "PostgreSQL reachable again: replaying the disk spool"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_are_reported_once() {
        let o = Outage::default();
        assert!(!o.is_down());
        assert!(!o.mark_up(0), "up while up is no transition");
        assert!(o.mark_down(&"refused"));
        assert!(!o.mark_down(&"refused again"));
        assert!(o.is_down());
        assert!(o.mark_up(3));
        assert!(!o.mark_up(3));
        assert!(!o.is_down());
    }
}
