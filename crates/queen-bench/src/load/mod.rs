//! The load engine shared by the broker scenarios: producers pushing numbered
//! messages, consumer groups popping and acking them, and per-message
//! end-to-end latency (push answered → consumer received).
//!
//! A message's number (`seq`) travels in its transactionId, which is shaped
//! like a UUID so the broker's dedup index sees realistic keys:
//! `<8 hex run prefix>-0000-7000-8000-<12 hex seq>`.
//!
//! Bounded twice: producers stop after `messages` or `seconds`, consumers when
//! every group received everything pushed or at their own deadline.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;

use crate::api::AckOutcome;
use crate::stats::{Latencies, LatencySummary};

mod loops;
mod payload;

use loops::{consume_loop, produce_loop, spawn_progress};
pub use payload::{
    parse_seq, partition_name, payload_for, push_body, push_body_binary, salt, txid, PushBody,
};
/// A system under test, as the engine drives it: it hands out one
/// connected producer per producing task and one consumer per consuming
/// task, before the clock starts.
pub trait Target: Sync {
    type Producer: Producer;
    type Consumer: Consumer;
    /// Producer number `index` (connections are opened here, unmeasured).
    fn producer(&self, index: u32) -> impl Future<Output = Result<Self::Producer>> + Send;
    /// Consumer number `index` of consumer group `group` (an index into
    /// `spec.groups`).
    fn consumer(
        &self,
        spec: &ConsumeSpec,
        group: usize,
        index: u32,
    ) -> impl Future<Output = Result<Self::Consumer>> + Send;
}

pub trait Producer: Send + 'static {
    /// Pushes messages `first..last` of the run, all to partition number
    /// `partition`, and returns once the system has acknowledged them
    /// durably; the result is how many it queued.
    fn push(
        &mut self,
        partition: u64,
        first: u64,
        last: u64,
    ) -> impl Future<Output = Result<u64>> + Send;
}

pub trait Consumer: Send + 'static {
    /// The next batch: the sequence number of each message, `None` for one
    /// that is not of this run. Empty when nothing came within the poll.
    fn pop(&mut self) -> impl Future<Output = Result<Vec<Option<u64>>>> + Send;
    /// Acknowledges everything the last pop returned; `None` when there was
    /// nothing to acknowledge.
    fn ack(&mut self) -> impl Future<Output = Result<Option<AckOutcome>>> + Send;
}

/// Identity and push times of the messages of one run.
pub struct RunState {
    pub prefix: String,
    pub queue: String,
    /// Pushes carry no transactionId: a message's number is in its payload
    /// (`{"seq":N,"pad":"…"}`, the peers' body) and the broker mints the id.
    pub anon: bool,
    /// How Queen's pushes are written (peers ignore it).
    pub body: PushBody,
    pub t0: Instant,
    /// Nanoseconds since `t0` (+1) when the push of message `seq` was answered; 0 = not yet.
    answered: Vec<AtomicU64>,
}

impl RunState {
    pub fn new(queue: String, capacity: u64) -> Arc<Self> {
        Self::shaped(queue, capacity, false)
    }

    /// A run whose pushes carry no transactionId when `anon`.
    pub fn shaped(queue: String, capacity: u64, anon: bool) -> Arc<Self> {
        Self::shaped_with(queue, capacity, anon, PushBody::Json)
    }

    /// [`RunState::shaped`] whose Queen pushes are written as `body`.
    pub fn shaped_with(queue: String, capacity: u64, anon: bool, body: PushBody) -> Arc<Self> {
        let prefix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        Arc::new(Self {
            prefix,
            queue,
            anon,
            body,
            t0: Instant::now(),
            answered: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    pub fn capacity(&self) -> u64 {
        self.answered.len() as u64
    }

    fn ns_since_t0(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.t0).as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }
}
#[derive(Debug, Clone)]
pub struct ProduceSpec {
    pub messages: u64,
    pub seconds: f64,
    pub producers: u32,
    pub batch: u32,
    pub partitions: u32,
    /// Batch k goes to partition k, new for each batch, instead of to
    /// partition k mod `partitions`.
    pub fresh: bool,
    /// Offered rate in msg/s (batches start on a fixed schedule); `None` = flat out.
    pub rate: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct ConsumeSpec {
    /// One entry per consumer group; `None` is queue mode.
    pub groups: Vec<Option<String>>,
    pub consumers_per_group: u32,
    pub batch: u32,
    pub pop_partitions: u32,
    /// Long-poll budget of each pop.
    pub wait_ms: u64,
    /// Consumers give up this long after the start of the run.
    pub seconds: f64,
    /// Without producers: how many messages (`0..prefilled`) are waiting.
    pub prefilled: u64,
}

/// One second of a run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SeriesPoint {
    /// End of the interval, seconds since the start of the run.
    pub t: f64,
    pub pushed_per_s: f64,
    pub received_per_s: f64,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
}

#[derive(Debug, Clone, Default)]
pub struct LoadOutcome {
    pub pushed: u64,
    pub push_requests: u64,
    /// From the start to the last push answered.
    pub push_seconds: f64,
    pub push_latency: LatencySummary,
    /// Unique messages received, per group.
    pub received: Vec<u64>,
    pub delivered: u64,
    /// From the start to the last new message received.
    pub consume_seconds: f64,
    pub pop_requests: u64,
    pub empty_pops: u64,
    pub redelivered: u64,
    pub foreign: u64,
    pub acked: u64,
    pub ack_failures: u64,
    pub first_ack_error: Option<String>,
    pub pop_latency: LatencySummary,
    pub ack_latency: LatencySummary,
    pub e2e: LatencySummary,
    /// Messages received before their push was answered (counted as 0 ms).
    pub early: u64,
    pub series: Vec<SeriesPoint>,
    /// Every group received every pushed message.
    pub complete: bool,
}

#[derive(Default)]
struct Live {
    pushed: AtomicU64,
    push_requests: AtomicU64,
    received: AtomicU64,
    pop_requests: AtomicU64,
    empty_pops: AtomicU64,
    redelivered: AtomicU64,
    foreign: AtomicU64,
    acked: AtomicU64,
    ack_failures: AtomicU64,
    producers_done: AtomicBool,
    first_ack_error: Mutex<Option<String>>,
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

struct Group {
    seen: Vec<AtomicU64>,
    received: AtomicU64,
}

impl Group {
    fn new(capacity: u64) -> Self {
        Self {
            seen: (0..capacity.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            received: AtomicU64::new(0),
        }
    }

    /// True the first time `seq` is marked.
    fn mark(&self, seq: u64) -> bool {
        let bit = 1u64 << (seq % 64);
        let word = &self.seen[(seq / 64) as usize];
        word.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }
}

/// Aborts the task when dropped.
pub struct AbortOnDrop(pub JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub struct Engine<'a, T> {
    pub target: &'a T,
    pub run: Arc<RunState>,
    pub label: String,
    pub broker_pid: Option<u32>,
    pub progress: bool,
}

impl<T: Target> Engine<'_, T> {
    pub async fn run(
        &self,
        produce: Option<&ProduceSpec>,
        consume: Option<&ConsumeSpec>,
    ) -> Result<LoadOutcome> {
        let run = &self.run;
        // Connections first, so that opening them is not measured.
        let mut ready_producers = Vec::new();
        if let Some(p) = produce {
            for i in 0..p.producers {
                ready_producers.push(self.target.producer(i).await?);
            }
        }
        let mut ready_consumers = Vec::new();
        if let Some(c) = consume {
            for gi in 0..c.groups.len() {
                for i in 0..c.consumers_per_group {
                    ready_consumers.push((gi, self.target.consumer(c, gi, i).await?));
                }
            }
        }
        let start = Instant::now();
        let live = Arc::new(Live::default());
        let groups: Arc<Vec<Group>> = Arc::new(
            consume
                .map(|c| {
                    c.groups
                        .iter()
                        .map(|_| Group::new(run.capacity()))
                        .collect()
                })
                .unwrap_or_default(),
        );
        if produce.is_none() {
            live.pushed
                .store(consume.map_or(0, |c| c.prefilled), Ordering::Relaxed);
            live.producers_done.store(true, Ordering::Release);
        }
        let (done_tx, done_rx) = watch::channel(false);
        let _progress = self.progress.then(|| {
            spawn_progress(
                self.label.clone(),
                Arc::clone(&live),
                start,
                self.broker_pid,
            )
        });

        let mut producers = JoinSet::new();
        if let Some(p) = produce {
            let next_batch = Arc::new(AtomicU64::new(0));
            for conn in ready_producers {
                producers.spawn(produce_loop(
                    conn,
                    Arc::clone(run),
                    p.clone(),
                    Arc::clone(&live),
                    Arc::clone(&next_batch),
                    start,
                ));
            }
        }
        let mut consumers = JoinSet::new();
        if let Some(c) = consume {
            for (gi, conn) in ready_consumers {
                consumers.spawn(consume_loop(
                    conn,
                    Arc::clone(run),
                    Arc::clone(&groups),
                    gi,
                    c.clone(),
                    Arc::clone(&live),
                    done_rx.clone(),
                    start,
                ));
            }
        }

        let mut push_lat = Latencies::default();
        let mut last_push = start;
        while let Some(joined) = producers.join_next().await {
            let (lat, last) = joined.map_err(|e| anyhow!("producer task panicked: {e}"))??;
            push_lat.merge(lat);
            last_push = last_push.max(last);
        }
        live.producers_done.store(true, Ordering::Release);

        // Wait for the groups to finish (or their deadline), watching for failures.
        if let Some(c) = consume {
            let deadline = start + Duration::from_secs_f64(c.seconds);
            loop {
                let target = get(&live.pushed);
                if groups.iter().all(|g| get(&g.received) >= target) || Instant::now() >= deadline {
                    break;
                }
                if let Some(joined) = consumers.try_join_next() {
                    joined.map_err(|e| anyhow!("consumer task panicked: {e}"))??;
                }
                if consumers.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let _ = done_tx.send(true);
        let mut pop_lat = Latencies::default();
        let mut ack_lat = Latencies::default();
        let mut samples: Vec<(u32, u32)> = Vec::new();
        let mut early = 0;
        let mut last_new = start;
        while let Some(joined) = consumers.join_next().await {
            let done = joined.map_err(|e| anyhow!("consumer task panicked: {e}"))??;
            pop_lat.merge(done.pop_latencies);
            ack_lat.merge(done.ack_latencies);
            samples.extend(done.samples);
            early += done.early;
            if let Some(at) = done.last_new {
                last_new = last_new.max(at);
            }
        }

        let pushed = get(&live.pushed);
        let first_ack_error = live
            .first_ack_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let received: Vec<u64> = groups.iter().map(|g| get(&g.received)).collect();
        let series = self.series(start, produce.is_some(), &samples);
        let mut e2e = Latencies::default();
        for &(_, us) in &samples {
            e2e.record_micros(u64::from(us));
        }
        Ok(LoadOutcome {
            pushed,
            push_requests: get(&live.push_requests),
            push_seconds: last_push.duration_since(start).as_secs_f64(),
            push_latency: push_lat.summary(),
            complete: !received.is_empty() && received.iter().all(|&r| r >= pushed),
            delivered: received.iter().sum(),
            received,
            consume_seconds: last_new.duration_since(start).as_secs_f64(),
            pop_requests: get(&live.pop_requests),
            empty_pops: get(&live.empty_pops),
            redelivered: get(&live.redelivered),
            foreign: get(&live.foreign),
            acked: get(&live.acked),
            ack_failures: get(&live.ack_failures),
            first_ack_error,
            pop_latency: pop_lat.summary(),
            ack_latency: ack_lat.summary(),
            e2e: e2e.summary(),
            early,
            series,
        })
    }

    /// Per-second push rate (from the answer times), receive rate and
    /// end-to-end percentiles (from the consumers' samples).
    fn series(&self, start: Instant, pushed: bool, samples: &[(u32, u32)]) -> Vec<SeriesPoint> {
        let offset_ms = start.duration_since(self.run.t0).as_millis() as u64;
        let mut bins: Vec<(u64, u64, Vec<u32>)> = Vec::new();
        let bin_of = |ms_since_t0: u64| (ms_since_t0.saturating_sub(offset_ms) / 1000) as usize;
        let touch = |bins: &mut Vec<(u64, u64, Vec<u32>)>, i: usize| {
            if bins.len() <= i {
                bins.resize_with(i + 1, || (0, 0, Vec::new()));
            }
        };
        if pushed {
            for a in &self.run.answered {
                let ns = a.load(Ordering::Relaxed);
                if ns == 0 {
                    continue;
                }
                let i = bin_of((ns - 1) / 1_000_000);
                touch(&mut bins, i);
                bins[i].0 += 1;
            }
        }
        for &(recv_ms, lat_us) in samples {
            let i = bin_of(u64::from(recv_ms));
            touch(&mut bins, i);
            bins[i].1 += 1;
            bins[i].2.push(lat_us);
        }
        bins.into_iter()
            .enumerate()
            .map(|(i, (p, r, lats))| {
                let mut lats: Vec<u64> = lats.into_iter().map(u64::from).collect();
                lats.sort_unstable();
                let pct = |q: f64| crate::stats::percentile(&lats, q).map(|us| us as f64 / 1000.0);
                SeriesPoint {
                    t: (i + 1) as f64,
                    pushed_per_s: p as f64,
                    received_per_s: r as f64,
                    e2e_p50_ms: pct(50.0),
                    e2e_p99_ms: pct(99.0),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txid_round_trip_and_shape() {
        let t = txid("0a1b2c3d", 0xabc);
        assert_eq!(t.len(), 36);
        assert!(uuid::Uuid::parse_str(&t).is_ok());
        assert_eq!(parse_seq("0a1b2c3d", &t), Some(0xabc));
        assert_eq!(parse_seq("ffffffff", &t), None);
        assert_eq!(parse_seq("0a1b2c3d", "0a1b2c3d-0000-7000-8000-xyz"), None);
    }

    #[test]
    fn payload_has_the_requested_size_and_differs_per_message() {
        assert_eq!(payload_for(256, 1, 7).len(), 256);
        assert_eq!(payload_for(15, 1, 7).len(), 15);
        assert_eq!(payload_for(0, 1, 7), "{\"pad\":\"\"}");
        let v: serde_json::Value = serde_json::from_str(&payload_for(64, 3, 7)).unwrap();
        assert!(v["pad"].is_string());
        assert_ne!(payload_for(64, 1, 7), payload_for(64, 2, 7));
        assert_eq!(payload_for(64, 1, 7), payload_for(64, 1, 7));
    }

    #[test]
    fn push_body_is_valid_json() {
        let run = RunState::new("q".into(), 10);
        let body = push_body(&run, "p3", 2, 5, 20);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0]["partition"], "p3");
        let t = items[2]["transactionId"].as_str().unwrap();
        assert_eq!(parse_seq(&run.prefix, t), Some(4));
    }

    #[test]
    fn binary_push_bodies_carry_the_json_items() {
        use queen_proto::push_binary::{decode_push, Limits};
        let limits = Limits {
            max_decoded_bytes: 1 << 20,
            max_payload_depth: 64,
            max_items: 100,
        };
        let run = RunState::new("q".into(), 10);
        let json: serde_json::Value =
            serde_json::from_str(&push_body(&run, "p3", 2, 5, 20)).unwrap();
        for zstd in [false, true] {
            let bytes = push_body_binary(&run, "p3", 2, 5, 20, zstd).unwrap();
            let body = decode_push(&bytes, &limits).unwrap();
            assert_eq!(body.items.len(), 3);
            for (item, want) in body.items.iter().zip(json["items"].as_array().unwrap()) {
                assert_eq!(item.partition.as_str(), "p3");
                assert_eq!(
                    item.transaction_id.as_deref(),
                    want["transactionId"].as_str()
                );
                assert_eq!(item.payload, want["payload"].to_string());
                assert_eq!(item.message_id.is_some(), zstd);
            }
        }
    }

    #[test]
    fn group_marks_each_seq_once() {
        let g = Group::new(130);
        assert!(g.mark(0));
        assert!(!g.mark(0));
        assert!(g.mark(129));
        assert!(g.mark(64));
        assert!(!g.mark(129));
    }
}
