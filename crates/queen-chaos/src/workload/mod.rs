//! Producers and consumers. Producers push uniquely numbered messages to
//! partitions they own (so each partition has one sequential writer), repeat
//! some transactionIds on purpose, retry unanswered pushes with the same ids,
//! and record what every attempt was told. Consumers in several groups pop from
//! random brokers, ack on random brokers, fail some messages on purpose (poison
//! ones always, flaky ones once), abandon some batches, and hold some past the
//! lease.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::rng::stable_hash;

mod consume;
pub mod locks;
mod produce;
pub mod recurring;
pub mod retry_delay;
pub mod stream;
pub mod surface;
pub mod timers;

pub use consume::{consumer, ConsumerLog};
pub use produce::producer;

/// Tunables of the workload.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    pub queue: String,
    pub partitions: usize,
    pub producers: usize,
    pub groups: Vec<String>,
    pub consumers_per_group: usize,
    /// Target messages per second over all producers.
    pub rate: f64,
    /// Most fresh messages all producers together push.
    pub max_messages: u64,
    pub lease_secs: u64,
    pub retry_limit: u32,
    /// Messages per pop request, at most.
    pub max_batch: u64,
}

/// Parts per thousand of messages that always fail for a group (end in its DLQ).
const POISON_PERMILLE: u64 = 8;
/// Parts per thousand of messages that fail once for a group, then succeed.
const FLAKY_PERMILLE: u64 = 20;
/// Chance that an item repeats an earlier transactionId of its partition.
const REPEAT_CHANCE: f64 = 0.04;
/// Chance that an item appears twice in its request.
const IN_REQUEST_REPEAT_CHANCE: f64 = 0.02;
/// Chance that a consumer drops a batch without acking it (lease left to expire).
const ABANDON_CHANCE: f64 = 0.02;
/// Chance that a consumer holds a batch past the lease on its own.
const PAUSE_CHANCE: f64 = 0.005;
/// Chance that a consumer extends its lease on some broker and holds the batch
/// past the original lease before acking.
const EXTEND_CHANCE: f64 = 0.03;
/// Chance that a consumer takes about its lease time (±300 ms) to process a batch.
const SLOW_CHANCE: f64 = 0.02;
/// Chance that a pop names one partition instead of taking any.
const NAMED_PARTITION_CHANCE: f64 = 0.1;
/// Attempts of one push request (same transactionIds every time).
const PUSH_ATTEMPTS: u32 = 8;

/// True when `group` always fails this message.
pub fn is_poison(group: &str, partition: &str, txid: &str) -> bool {
    stable_hash(&[group, partition, txid]) % 1000 < POISON_PERMILLE
}

/// True when `group` fails this message on its first failure-eligible delivery.
pub fn is_flaky(group: &str, partition: &str, txid: &str) -> bool {
    let h = stable_hash(&[group, partition, txid]) % 1000;
    (POISON_PERMILLE..POISON_PERMILLE + FLAKY_PERMILLE).contains(&h)
}

/// Partition name of index `i`.
pub fn partition_name(i: usize) -> String {
    format!("p{i:02}")
}

/// Flags and shared state the orchestrator and the schedule use.
#[derive(Debug)]
pub struct Control {
    pub t0: Instant,
    /// Nothing runs past this, whatever else happens.
    pub hard_deadline: Instant,
    pub stop_producers: AtomicBool,
    /// Consumers stop failing flaky messages, abandoning and pausing.
    pub drain_mode: AtomicBool,
    pub stop_consumers: AtomicBool,
    /// `pause[group][consumer]`: hold the next batch past the lease.
    pub pause: Vec<Vec<AtomicBool>>,
    /// (group, partition, txid) already failed once as flaky.
    flaky_done: Mutex<HashSet<(usize, String, String)>>,
    /// Items answered queued, buffered or duplicate so far (progress lines).
    pub vouched: AtomicU64,
    /// Messages delivered by pops so far (progress lines).
    pub delivered: AtomicU64,
}

impl Control {
    pub fn new(t0: Instant, hard_deadline: Instant, groups: usize, consumers: usize) -> Self {
        Self {
            t0,
            hard_deadline,
            stop_producers: AtomicBool::new(false),
            drain_mode: AtomicBool::new(false),
            stop_consumers: AtomicBool::new(false),
            pause: (0..groups)
                .map(|_| (0..consumers).map(|_| AtomicBool::new(false)).collect())
                .collect(),
            flaky_done: Mutex::new(HashSet::new()),
            vouched: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
        }
    }

    pub fn micros(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    fn past_deadline(&self) -> bool {
        Instant::now() >= self.hard_deadline
    }

    /// True the first time `(group, partition, txid)` is asked.
    fn first_flaky_failure(&self, group: usize, partition: &str, txid: &str) -> bool {
        self.flaky_done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((group, partition.to_owned(), txid.to_owned()))
    }
}

/// The HTTP client every worker uses: short timeouts, loopback only.
pub fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(2))
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?)
}

/// Creates the queue with a short lease and a small retry limit.
pub async fn configure(
    http: &reqwest::Client,
    url: &str,
    cfg: &WorkloadConfig,
) -> anyhow::Result<()> {
    let body = json!({"queue": cfg.queue,
                      "options": {"leaseTime": cfg.lease_secs, "retryLimit": cfg.retry_limit}});
    let resp = http
        .post(format!("{url}/api/v1/configure"))
        .json(&body)
        .send()
        .await?;
    let status = resp.status();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() || v["configured"] != true {
        anyhow::bail!("configure answered {status}: {v}");
    }
    Ok(())
}
