//! The one retry schedule of the broker's loops: a first delay held for a
//! number of steps, then growing by a factor up to a ceiling, and back to
//! the start on [`Backoff::reset`]. Used by parked pops between re-checks,
//! mesh dialers between reconnects, the spool replay after a failed batch
//! and the start-up migrations while PostgreSQL is away.

use std::time::Duration;

use crate::config::PopConfig;

/// A delay schedule; pure, so the loops using it are tested without I/O.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    current: Duration,
    max: Duration,
    factor: f64,
    /// Steps taken at `first` before the delay starts growing.
    steady_steps: u32,
    steps: u32,
}

impl Backoff {
    /// Starts at `first` and doubles after every step, up to `max`.
    pub fn doubling(first: Duration, max: Duration) -> Self {
        let first = first.min(max);
        Self {
            first,
            current: first,
            max,
            factor: 2.0,
            steady_steps: 1,
            steps: 0,
        }
    }

    /// The same delay every time.
    pub fn fixed(delay: Duration) -> Self {
        Self {
            factor: 1.0,
            ..Self::doubling(delay, delay)
        }
    }

    /// The re-check schedule of a parked pop (`POP_WAIT_*` / `QUEEN_POP_WAIT_*`).
    pub fn for_long_poll(c: &PopConfig) -> Self {
        Self {
            factor: c.wait_backoff_multiplier,
            steady_steps: c.wait_backoff_threshold,
            ..Self::doubling(c.wait_initial_interval, c.wait_max_interval)
        }
    }

    /// Returns the delay to wait now, and advances the schedule.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.current;
        self.steps = self.steps.saturating_add(1);
        if self.steps >= self.steady_steps {
            self.current = self.current.mul_f64(self.factor).min(self.max);
        }
        delay
    }

    /// Starts the schedule over (the peer is back, the replay went through).
    pub fn reset(&mut self) {
        self.current = self.first;
        self.steps = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SubscriptionMode;

    fn millis(b: &mut Backoff, n: usize) -> Vec<u128> {
        (0..n).map(|_| b.next_delay().as_millis()).collect()
    }

    #[test]
    fn backoff_grows_after_threshold_up_to_ceiling() {
        let c = PopConfig {
            default_batch: 1,
            default_timeout: Duration::from_secs(30),
            default_subscription_mode: SubscriptionMode::All,
            wait_initial_interval: Duration::from_millis(100),
            wait_backoff_threshold: 3,
            wait_backoff_multiplier: 2.0,
            wait_max_interval: Duration::from_millis(1000),
            autopilot: crate::config::AutopilotConfig {
                mode: crate::config::AutopilotMode::On,
                batch: 100,
                max_batch: 1000,
                drain: Duration::from_millis(200),
            },
        };
        let mut b = Backoff::for_long_poll(&c);
        assert_eq!(
            millis(&mut b, 8),
            vec![100, 100, 100, 200, 400, 800, 1000, 1000]
        );
    }

    #[test]
    fn doubling_resets_and_fixed_stays() {
        let mut b = Backoff::doubling(Duration::from_millis(250), Duration::from_secs(5));
        assert_eq!(
            millis(&mut b, 7),
            vec![250, 500, 1000, 2000, 4000, 5000, 5000]
        );
        b.reset();
        assert_eq!(millis(&mut b, 2), vec![250, 500]);
        let mut f = Backoff::fixed(Duration::from_secs(2));
        assert_eq!(millis(&mut f, 3), vec![2000, 2000, 2000]);
    }
}
