//! When the consumer group commit's next flight leaves (`flights.rs`): at
//! once, or once the clients the last flight answered have come back.
//!
//! A consume flight's cost is mostly fixed (one statement of many plan nodes,
//! one commit, one round trip): one carrying twice the requests costs
//! PostgreSQL little more. The clients a flight answers usually send their
//! next request at once (a consumer acks what it popped, then pops again). A flight that leaves the moment the last one landed carries only
//! what came in while that one flew, and the answered clients' next requests
//! then wait a whole flight for it to land. So, with no flight in the air,
//! the next one waits until as many requests have arrived since the last
//! landing as that flight answered, for at most as long as that flight flew;
//! but only while the answered clients have lately come back within that
//! time. Clients that do not (slow handlers, a consumer that stopped) make
//! one wait run out, and flights leave at once again until arrivals are that
//! fast once more, which is how it starts. A lone client never waits: it is
//! the one request its last flight answered. A wait never lasts longer than
//! [`MAX_HOLD`], and there is none after a flight that flew longer than that:
//! such a flight's time is its work (large batches, large payloads), which
//! waiting does not share out, only delays. (The push batcher does not wait: its flights cost less
//! per flight, and waiting there cost single-message producers throughput.)
//! `docs/benchmarks.md` ("Consume path, part 6") has the measurements.

use std::time::Duration;

use tokio::time::Instant;

/// Longest wait, and the longest flight after which the next one waits: a
/// few times the 1-2 ms a flight of single-message pops and acks takes on a
/// 2-core box. A flight that flew longer did so for its work (pops of 100
/// messages of 4 KiB flew 18 ms) or a slow database, which waiting would
/// only add to: measured, waiting after those cost 8 % of the msg/s.
const MAX_HOLD: Duration = Duration::from_millis(5);

/// A flight that landed.
#[derive(Debug, Clone, Copy)]
struct Landing {
    at: Instant,
    /// Requests it answered.
    answered: usize,
    /// How long it was in the air.
    flew: Duration,
}

/// The departure rule of one group commit; see the module docs.
#[derive(Debug, Default)]
pub(super) struct Linger {
    landed: Option<Landing>,
    /// Requests arrived since that landing.
    arrived: usize,
    /// Whether the clients a recent flight answered came back before another
    /// flight's time had passed.
    fast: bool,
}

impl Linger {
    /// A request arrived at `now`.
    pub(super) fn arrived(&mut self, now: Instant) {
        self.arrived += 1;
        if let Some(l) = self.landed {
            if self.arrived == l.answered && now.saturating_duration_since(l.at) <= l.flew {
                self.fast = true;
            }
        }
    }

    /// A flight that flew for `flew` landed at `now`, answering `answered`
    /// requests.
    pub(super) fn landed(&mut self, now: Instant, answered: usize, flew: Duration) {
        if self.landed.is_some_and(|l| self.arrived < l.answered) {
            // the last flight's clients were not all back a flight later
            self.fast = false;
        }
        self.landed = Some(Landing {
            at: now,
            answered,
            flew,
        });
        self.arrived = 0;
    }

    /// Whether the last flight flew longer than [`MAX_HOLD`]: its time was
    /// its work, so a second flight in the air costs nothing a shared one
    /// would save, and uses the other cores.
    pub(super) fn work_bound(&self) -> bool {
        self.landed.is_some_and(|l| l.flew > MAX_HOLD)
    }

    /// Until when the next flight should wait, with none in the air; `None`:
    /// it leaves now. A wait that ran out counts against waiting next time.
    pub(super) fn hold(&mut self, now: Instant) -> Option<Instant> {
        let l = self.landed?;
        if !self.fast || self.arrived >= l.answered || self.work_bound() {
            return None;
        }
        let until = l.at + l.flew;
        if now >= until {
            self.fast = false;
            return None;
        }
        Some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn arrive(l: &mut Linger, at: Instant, n: usize) {
        for _ in 0..n {
            l.arrived(at);
        }
    }

    #[test]
    fn leaves_at_once_until_clients_have_come_back_within_a_flight() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        assert_eq!(l.hold(t0), None, "nothing landed yet");
        l.landed(t0, 8, 2 * MS);
        assert_eq!(l.hold(t0), None, "not yet seen coming back fast");
        arrive(&mut l, t0 + MS, 8);
        // the next landing: it waits for its 10 clients
        let t1 = t0 + 2 * MS;
        l.landed(t1, 10, 2 * MS);
        assert_eq!(l.hold(t1), Some(t1 + 2 * MS));
        arrive(&mut l, t1 + MS / 2, 9);
        assert_eq!(l.hold(t1 + MS / 2), Some(t1 + 2 * MS));
        arrive(&mut l, t1 + MS, 1);
        assert_eq!(l.hold(t1 + MS), None, "all ten are back");
    }

    #[test]
    fn a_wait_that_runs_out_stops_the_waiting() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        l.landed(t0, 4, MS);
        arrive(&mut l, t0, 4);
        let t1 = t0 + MS;
        l.landed(t1, 4, MS);
        arrive(&mut l, t1, 1);
        assert_eq!(l.hold(t1), Some(t1 + MS));
        assert_eq!(l.hold(t1 + MS), None, "ran out");
        // the flight that left then lands; its clients are slow too
        let t2 = t1 + 3 * MS;
        l.landed(t2, 1, MS);
        assert_eq!(l.hold(t2), None);
        arrive(&mut l, t2 + 5 * MS, 1);
        let t3 = t2 + 6 * MS;
        l.landed(t3, 1, MS);
        assert_eq!(l.hold(t3), None, "came back, but later than a flight");
    }

    #[test]
    fn clients_not_back_by_the_next_landing_stop_the_waiting() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        l.landed(t0, 2, MS);
        arrive(&mut l, t0, 2);
        let t1 = t0 + MS;
        l.landed(t1, 6, MS);
        assert!(l.hold(t1).is_some());
        // a second flight in the air landed first, with only 3 of the 6 back
        arrive(&mut l, t1, 3);
        let t2 = t1 + MS / 2;
        l.landed(t2, 1, MS);
        assert_eq!(l.hold(t2), None);
    }

    #[test]
    fn no_wait_after_a_flight_longer_than_max_hold() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        l.landed(t0, 2, MS);
        arrive(&mut l, t0 + MS / 2, 2);
        let t1 = t0 + 2 * MS;
        l.landed(t1, 2, MAX_HOLD + MS);
        assert_eq!(l.hold(t1), None, "a long flight: no wait");
        arrive(&mut l, t1 + MS, 2);
        let t2 = t1 + MAX_HOLD;
        l.landed(t2, 2, MAX_HOLD);
        assert_eq!(l.hold(t2), Some(t2 + MAX_HOLD), "up to MAX_HOLD");
    }

    #[test]
    fn a_lone_client_never_waits() {
        let t0 = Instant::now();
        let mut l = Linger::default();
        let mut t = t0;
        for _ in 0..5 {
            l.landed(t, 1, MS);
            t += MS / 4;
            arrive(&mut l, t, 1);
            assert_eq!(l.hold(t), None, "its next request is the one expected");
            t += MS;
        }
        assert!(l.fast);
    }
}
