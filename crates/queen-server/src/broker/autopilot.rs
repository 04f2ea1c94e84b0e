//! Pop autopilot: the broker sizes the knobs a pop left to it.
//!
//! The 2.6.0 client's default `consume()` and `pop()` name neither `batch`
//! nor `partitions` and send `autopilot=true`. For each such pop the broker
//! chooses the unset knobs, never the pinned ones, per lane (queue and
//! consumer group), from what it knows at that moment without asking the
//! database:
//!
//! - the lane's **ready partitions**: the candidates of the hint list
//!   (`recent.rs`) the group has not found drained, up to the 32 a pop is
//!   handed;
//! - the **consumers** of the lane: its pops in progress, parked long polls
//!   included, this one too;
//! - its **fill**: messages per claimed partition over its recent pops
//!   (EWMA, α = 1/4), which says how many messages a ready partition holds
//!   (at most the batch over the width, the most a pop could see);
//! - its **delivery rate**: messages per second handed to the lane (EWMA of
//!   one-second windows), which in a steady state is the arrival rate and
//!   under a backlog is what the consumers drain.
//!
//! The rule (`decide`):
//! - `batch` = what the lane delivers in `QUEEN_POP_AUTOPILOT_DRAIN_MS`
//!   (200 ms), within `QUEEN_POP_AUTOPILOT_BATCH` (100) and
//!   `QUEEN_POP_AUTOPILOT_MAX_BATCH` (1 000): a lane with no history gets 100
//!   per pop, a lane that drains 20 000 msg/s gets 1 000 per round trip;
//! - `partitions` = enough partitions to fill that batch at the lane's fill
//!   (`ceil(batch / fill)`), but no more than the consumer's fair share of
//!   the ready partitions (`ceil(ready / consumers)`), within 1 and 64: one
//!   partition while partitions hold a batch each, which keeps the pop on the
//!   one-statement path (`consume_flight.sql`) and leaves the other
//!   partitions to the other consumers; many partitions when each holds a
//!   few messages (10 000 partitions of one message each). Nothing is held
//!   back to fill a batch, so a parked consumer still gets a message pushed
//!   to an idle queue at the wake.
//!
//! It does not read the age of the oldest ready message: that costs a
//! database read per pop, and a lane whose pops keep coming back full is
//! widened by its fill before age would tell.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts, Registry};

use crate::config::{AutopilotConfig, AutopilotMode};

/// The widest sweep autopilot chooses (the reference's bound).
pub const MAX_PARTITIONS: u32 = 64;
/// Lanes remembered; past this they start over (cold).
const MAX_LANES: usize = 50_000;
/// A lane idle this long starts over (cold).
const IDLE_RESET: Duration = Duration::from_secs(10);
/// The delivery rate is measured over windows of at least this long.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// Weight of a new sample in the moving averages.
const ALPHA: f64 = 0.25;

/// What a pop asked for and what the lane knows, for [`decide`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inputs {
    /// The batch the client pinned, if it did.
    pub pinned_batch: Option<u32>,
    /// The sweep width the client pinned, if it did.
    pub pinned_partitions: Option<u32>,
    /// Ready partitions the hint list knows for the lane; `None` when the
    /// pop names its partition.
    pub ready: Option<usize>,
    /// Pops of the lane in progress, this one included.
    pub consumers: u32,
    /// Messages per claimed partition (EWMA); `None` for a cold lane.
    pub fill: Option<f64>,
    /// Messages per second delivered to the lane (EWMA).
    pub rate: f64,
}

/// The knobs a pop runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub batch: u32,
    pub partitions: u32,
}

/// The rule of the module docs; pinned knobs are kept as they are.
pub fn decide(cfg: &AutopilotConfig, i: &Inputs) -> Sizing {
    let batch = i.pinned_batch.unwrap_or_else(|| {
        let drained = (i.rate * cfg.drain.as_secs_f64()).ceil();
        // a float past u32 saturates in the cast
        (drained as u32).clamp(cfg.batch, cfg.max_batch)
    });
    let partitions = i.pinned_partitions.unwrap_or_else(|| match i.ready {
        // a named partition is one partition
        None => 1,
        Some(ready) => {
            let fill = i.fill.unwrap_or(f64::from(batch)).max(1.0);
            let need = (f64::from(batch) / fill).ceil() as u32;
            let consumers = i.consumers.max(1) as usize;
            let share = u32::try_from(ready.div_ceil(consumers)).unwrap_or(u32::MAX);
            need.min(share.max(1)).clamp(1, MAX_PARTITIONS)
        }
    });
    Sizing { batch, partitions }
}

/// Per-lane state and the metrics of what autopilot chose.
#[derive(Debug)]
pub struct Autopilot {
    cfg: AutopilotConfig,
    lanes: Mutex<HashMap<(String, String), Lane>>,
    decisions: IntCounterVec,
    batch: Histogram,
    partitions: Histogram,
}

#[derive(Debug)]
struct Lane {
    active: u32,
    fill: Option<f64>,
    rate: f64,
    window_start: Instant,
    window_messages: u64,
    last_seen: Instant,
}

impl Lane {
    fn new(now: Instant) -> Self {
        Self {
            active: 0,
            fill: None,
            rate: 0.0,
            window_start: now,
            window_messages: 0,
            last_seen: now,
        }
    }
}

/// A pop of a lane in progress (counted among the lane's consumers until dropped).
#[derive(Debug)]
pub struct LaneGuard<'a> {
    autopilot: &'a Autopilot,
    key: (String, String),
}

impl Drop for LaneGuard<'_> {
    fn drop(&mut self) {
        let mut lanes = self.autopilot.lock();
        if let Some(lane) = lanes.get_mut(&self.key) {
            lane.active = lane.active.saturating_sub(1);
        }
    }
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
        .expect("valid metric");
    registry
        .register(Box::new(h.clone()))
        .expect("unique metric");
    h
}

impl Autopilot {
    pub fn new(cfg: AutopilotConfig, registry: &Registry) -> Self {
        let decisions = IntCounterVec::new(
            Opts::new(
                "queen_pop_autopilot_decisions_total",
                "pops sized by autopilot (mode on: served as chosen; shadow: chosen and counted, the defaults served)",
            ),
            &["mode"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(decisions.clone()))
            .expect("unique metric");
        Self {
            cfg,
            lanes: Mutex::default(),
            decisions,
            batch: histogram(
                registry,
                "queen_pop_autopilot_batch",
                "batch autopilot chose per pop",
                vec![
                    1.0, 10.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0,
                ],
            ),
            partitions: histogram(
                registry,
                "queen_pop_autopilot_partitions",
                "sweep width autopilot chose per pop",
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
            ),
        }
    }

    pub fn mode(&self) -> AutopilotMode {
        self.cfg.mode
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Lane>> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a pop of (`queue`, `group`) among the lane's consumers while
    /// the guard lives.
    pub fn enter(&self, queue: &str, group: &str) -> LaneGuard<'_> {
        let key = (queue.to_owned(), group.to_owned());
        let now = Instant::now();
        let mut lanes = self.lock();
        if lanes.len() >= MAX_LANES && !lanes.contains_key(&key) {
            lanes.retain(|_, l| l.active > 0);
        }
        let lane = lanes.entry(key.clone()).or_insert_with(|| Lane::new(now));
        if lane.active == 0 && now.duration_since(lane.last_seen) > IDLE_RESET {
            *lane = Lane::new(now);
        }
        lane.active += 1;
        lane.last_seen = now;
        drop(lanes);
        LaneGuard {
            autopilot: self,
            key,
        }
    }

    /// Chooses the knobs of one pop of the lane `guard` counts, and counts
    /// the choice.
    pub fn choose(
        &self,
        guard: &LaneGuard<'_>,
        pinned_batch: Option<u32>,
        pinned_partitions: Option<u32>,
        ready: Option<usize>,
    ) -> Sizing {
        let inputs = {
            let lanes = self.lock();
            let lane = lanes.get(&guard.key);
            Inputs {
                pinned_batch,
                pinned_partitions,
                ready,
                consumers: lane.map_or(1, |l| l.active),
                fill: lane.and_then(|l| l.fill),
                rate: lane.map_or(0.0, |l| l.rate),
            }
        };
        let sizing = decide(&self.cfg, &inputs);
        self.decisions
            .with_label_values(&[self.cfg.mode.as_str()])
            .inc();
        self.batch.observe(f64::from(sizing.batch));
        self.partitions.observe(f64::from(sizing.partitions));
        sizing
    }

    /// What a pop of the lane delivered: `messages` from `partitions` claimed.
    pub fn delivered(&self, guard: &LaneGuard<'_>, messages: usize, partitions: usize) {
        let now = Instant::now();
        let mut lanes = self.lock();
        let Some(lane) = lanes.get_mut(&guard.key) else {
            return;
        };
        if messages > 0 && partitions > 0 {
            let sample = messages as f64 / partitions as f64;
            lane.fill = Some(lane.fill.map_or(sample, |f| f + ALPHA * (sample - f)));
        }
        lane.window_messages += messages as u64;
        let elapsed = now.duration_since(lane.window_start);
        if elapsed >= RATE_WINDOW {
            let sample = lane.window_messages as f64 / elapsed.as_secs_f64();
            lane.rate += ALPHA * (sample - lane.rate);
            lane.window_start = now;
            lane.window_messages = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AutopilotConfig {
        AutopilotConfig {
            mode: AutopilotMode::On,
            batch: 100,
            max_batch: 1000,
            drain: Duration::from_millis(200),
        }
    }

    fn inputs() -> Inputs {
        Inputs {
            pinned_batch: None,
            pinned_partitions: None,
            ready: Some(16),
            consumers: 1,
            fill: None,
            rate: 0.0,
        }
    }

    #[test]
    fn a_cold_lane_gets_the_base_batch_from_one_partition() {
        let s = decide(&cfg(), &inputs());
        assert_eq!(
            s,
            Sizing {
                batch: 100,
                partitions: 1
            }
        );
    }

    #[test]
    fn pinned_knobs_are_kept_whatever_the_lane_says() {
        let i = Inputs {
            pinned_batch: Some(7),
            pinned_partitions: Some(3),
            ready: Some(1000),
            fill: Some(1.0),
            rate: 1e9,
            ..inputs()
        };
        assert_eq!(
            decide(&cfg(), &i),
            Sizing {
                batch: 7,
                partitions: 3
            }
        );
        // one pinned, the other chosen around it
        let i = Inputs {
            pinned_batch: Some(10),
            fill: Some(1.0),
            ..inputs()
        };
        assert_eq!(
            decide(&cfg(), &i),
            Sizing {
                batch: 10,
                partitions: 10
            }
        );
        let i = Inputs {
            pinned_partitions: Some(1),
            fill: Some(1.0),
            rate: 5_000.0,
            ..inputs()
        };
        assert_eq!(
            decide(&cfg(), &i),
            Sizing {
                batch: 1000,
                partitions: 1
            }
        );
    }

    #[test]
    fn the_batch_follows_the_delivery_rate_within_its_bounds() {
        let at = |rate| decide(&cfg(), &Inputs { rate, ..inputs() }).batch;
        assert_eq!(at(0.0), 100);
        assert_eq!(at(400.0), 100);
        assert_eq!(at(2_000.0), 400);
        assert_eq!(at(20_000.0), 1000);
        assert_eq!(at(f64::INFINITY), 1000);
        assert_eq!(at(f64::NAN), 100);
    }

    #[test]
    fn thin_partitions_widen_the_sweep_up_to_the_fair_share() {
        // 10 000 partitions of one message, one consumer: the widest sweep
        let i = Inputs {
            ready: Some(32),
            fill: Some(1.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 32);
        // four consumers share 16 ready partitions: 4 each at most
        let i = Inputs {
            ready: Some(16),
            consumers: 4,
            fill: Some(2.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 4);
        // partitions that hold a batch each: one partition per pop
        let i = Inputs {
            ready: Some(16),
            fill: Some(100.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 1);
        // never wider than 64, never 0
        let i = Inputs {
            pinned_batch: Some(10_000),
            ready: Some(10_000),
            fill: Some(0.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 64);
        let i = Inputs {
            ready: Some(0),
            consumers: 9,
            fill: Some(1.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 1);
    }

    #[test]
    fn a_named_partition_is_one_partition() {
        let i = Inputs {
            ready: None,
            fill: Some(1.0),
            ..inputs()
        };
        assert_eq!(decide(&cfg(), &i).partitions, 1);
    }

    #[test]
    fn a_lane_learns_its_fill_and_counts_its_consumers() {
        let registry = Registry::new();
        let ap = Autopilot::new(cfg(), &registry);
        let a = ap.enter("q", "g");
        let b = ap.enter("q", "g");
        // two consumers, 8 ready, cold: one partition each
        assert_eq!(ap.choose(&a, None, None, Some(8)).partitions, 1);
        // pops came back with 2 messages per partition: widen to the share (4)
        for _ in 0..20 {
            ap.delivered(&a, 2, 1);
        }
        assert_eq!(ap.choose(&a, None, None, Some(8)).partitions, 4);
        drop(b);
        // alone now: the whole ready set is its share
        assert_eq!(ap.choose(&a, None, None, Some(8)).partitions, 8);
        drop(a);
        let other = ap.enter("q", "h");
        assert_eq!(ap.choose(&other, None, None, Some(8)).partitions, 1);
    }
}
