//! The `push-pop` scenario: push N messages, then drain them with pop + ack/batch.
//!
//! Every loop is bounded twice: by the amount of work (batches to push,
//! messages to receive) and by a per-phase deadline (`--seconds`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use serde::Serialize;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};

use crate::api::{AckItem, Api, Payload, PopParams, PushItem, PushStatus};
use crate::report::{PhaseReport, Report};
use crate::stats::Latencies;

/// Pause after an empty pop so idle consumers do not spin (with `wait=true` the
/// broker already held the request; this only guards against one that does not).
const EMPTY_POP_BACKOFF: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, clap::Args, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushPopConfig {
    /// Broker base URL.
    #[arg(long, default_value = "http://127.0.0.1:6632")]
    pub url: String,
    /// Queue to use (created on the fly by push). Default: bench-<random>.
    #[arg(long)]
    pub queue: Option<String>,
    /// Messages to push, then drain.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub messages: u64,
    /// Items per push request and `batch` of each pop.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// Concurrent push tasks.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub producers: u32,
    /// Concurrent pop+ack tasks.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub consumers: u32,
    /// Partitions p0..p{N-1}; push batch i goes to partition p{i mod N}.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub partitions: u32,
    /// Padding bytes in each message payload ({"seq":n,"pad":"xxx..."}).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(0..=10_000_000))]
    pub payload_bytes: u32,
    /// Deadline of each phase in seconds.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub seconds: u64,
    /// Long-poll pops (`wait=true&timeout=<poll-timeout-ms>`) instead of `wait=false`.
    #[arg(long)]
    pub wait: bool,
    /// Long-poll budget in ms (with --wait).
    #[arg(long, default_value_t = 1000)]
    pub poll_timeout_ms: u64,
    /// `partitions` query parameter of each pop (partitions claimed per pop).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub pop_partitions: u32,
    /// Client-side timeout of a single HTTP request in ms.
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout_ms: u64,
    /// Also write the results as JSON to this path.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// Delete the queue after the run (best effort).
    #[arg(long)]
    pub delete_queue: bool,
}

/// Shared counters read by the once-a-second progress line.
#[derive(Default)]
struct Counters {
    messages: AtomicU64,
    requests: AtomicU64,
    empty_pops: AtomicU64,
    redelivered: AtomicU64,
    /// Popped messages this run did not push.
    foreign: AtomicU64,
    acked: AtomicU64,
    ack_failures: AtomicU64,
}

/// Counters are statistics only, so relaxed ordering is enough.
fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Aborts the wrapped task when dropped (progress reporters, on every exit path).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub async fn run_push_pop(mut cfg: PushPopConfig) -> Result<()> {
    if cfg.wait && cfg.request_timeout_ms <= cfg.poll_timeout_ms {
        bail!("--request-timeout-ms must exceed --poll-timeout-ms when --wait is set");
    }
    let queue = cfg
        .queue
        .get_or_insert_with(|| {
            format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
        })
        .clone();
    let api = Api::new(&cfg.url, Duration::from_millis(cfg.request_timeout_ms))?;
    api.check_reachable().await?;
    eprintln!(
        "queen-bench push-pop: {} messages, batch {}, {} producers, {} consumers, {} partitions, queue {queue} at {}",
        cfg.messages,
        cfg.batch,
        cfg.producers,
        cfg.consumers,
        cfg.partitions,
        api.base()
    );

    let push = push_phase(&api, &cfg, &queue).await?;
    let drain = drain_phase(&api, &cfg, &queue, Arc::clone(&push.expected)).await?;

    let report = Report::new(&cfg, &queue, &push, &drain);
    report.print_table();
    if let Some(path) = &cfg.json_out {
        report.write_json(path)?;
        eprintln!("wrote {}", path.display());
    }
    if cfg.delete_queue {
        if let Err(e) = api.delete_queue(&queue).await {
            eprintln!("warning: could not delete queue {queue}: {e:#}");
        }
    }

    if push.queued < cfg.messages {
        bail!(
            "push phase incomplete: {} of {} messages queued within {}s",
            push.queued,
            cfg.messages,
            cfg.seconds
        );
    }
    if drain.received < push.queued {
        bail!(
            "drain phase incomplete: received {} of {} messages within {}s",
            drain.received,
            push.queued,
            cfg.seconds
        );
    }
    Ok(())
}

pub struct PushResult {
    pub queued: u64,
    pub duplicates: u64,
    pub elapsed: Duration,
    pub report: PhaseReport,
    /// transactionIds the broker reported `queued`: what the drain phase waits for.
    expected: Arc<HashSet<String>>,
}

async fn push_phase(api: &Api, cfg: &PushPopConfig, queue: &str) -> Result<PushResult> {
    let total_batches = cfg.messages.div_ceil(u64::from(cfg.batch));
    let next_batch = Arc::new(AtomicU64::new(0));
    let counters = Arc::new(Counters::default());
    let pad: Arc<str> = "x".repeat(cfg.payload_bytes as usize).into();
    let partitions: Arc<[String]> = (0..cfg.partitions).map(|i| format!("p{i}")).collect();
    let queue: Arc<str> = queue.into();

    let started = Instant::now();
    let deadline = started + Duration::from_secs(cfg.seconds);
    let _progress = spawn_progress("push", cfg.messages, Arc::clone(&counters), started);

    let mut tasks = JoinSet::new();
    for _ in 0..cfg.producers {
        let producer = Producer {
            api: api.clone(),
            queue: Arc::clone(&queue),
            partitions: Arc::clone(&partitions),
            pad: Arc::clone(&pad),
            next_batch: Arc::clone(&next_batch),
            counters: Arc::clone(&counters),
            total_batches,
            batch: u64::from(cfg.batch),
            messages: cfg.messages,
            deadline,
        };
        tasks.spawn(producer.run());
    }

    let mut latencies = Latencies::default();
    let mut expected = HashSet::with_capacity(usize::try_from(cfg.messages).unwrap_or(0));
    let mut duplicates = 0;
    while let Some(joined) = tasks.join_next().await {
        let done = joined.map_err(|e| anyhow!("producer task panicked: {e}"))??;
        latencies.merge(done.latencies);
        expected.extend(done.queued);
        duplicates += done.duplicates;
    }
    let elapsed = started.elapsed();
    let queued = expected.len() as u64;
    eprintln!(
        "push done: {queued} queued, {duplicates} duplicates in {:.2}s",
        elapsed.as_secs_f64()
    );
    Ok(PushResult {
        queued,
        duplicates,
        elapsed,
        report: PhaseReport::new("push", queued, get(&counters.requests), elapsed, latencies),
        expected: Arc::new(expected),
    })
}

struct Producer {
    api: Api,
    queue: Arc<str>,
    partitions: Arc<[String]>,
    pad: Arc<str>,
    next_batch: Arc<AtomicU64>,
    counters: Arc<Counters>,
    total_batches: u64,
    batch: u64,
    messages: u64,
    deadline: Instant,
}

struct ProducerDone {
    latencies: Latencies,
    queued: Vec<String>,
    duplicates: u64,
}

impl Producer {
    async fn run(self) -> Result<ProducerDone> {
        let mut done = ProducerDone {
            latencies: Latencies::default(),
            queued: Vec::new(),
            duplicates: 0,
        };
        // Bounded by the shared batch counter and by the deadline.
        while Instant::now() < self.deadline {
            let index = self.next_batch.fetch_add(1, Ordering::Relaxed);
            if index >= self.total_batches {
                break;
            }
            let first = index * self.batch;
            let last = (first + self.batch).min(self.messages);
            let partition_index = usize::try_from(index % self.partitions.len() as u64)?;
            let partition = &self.partitions[partition_index];
            let items: Vec<PushItem<'_>> = (first..last)
                .map(|seq| PushItem {
                    queue: &self.queue,
                    partition,
                    payload: Payload {
                        seq,
                        pad: &self.pad,
                    },
                    transaction_id: uuid::Uuid::now_v7().to_string(),
                })
                .collect();

            let sent = Instant::now();
            let outcome = self.api.push(&items).await?;
            done.latencies.record(sent.elapsed());
            add(&self.counters.requests, 1);

            let mut queued = 0;
            for (item, status) in items.into_iter().zip(outcome.statuses) {
                match status {
                    PushStatus::Queued => {
                        done.queued.push(item.transaction_id);
                        queued += 1;
                    }
                    PushStatus::Duplicate => done.duplicates += 1,
                    PushStatus::Failed(error) => {
                        bail!(
                            "push of {} to {partition} failed: {error}",
                            item.transaction_id
                        )
                    }
                    PushStatus::Other(status) => bail!(
                        "push of {} to {partition}: unexpected status {status:?}",
                        item.transaction_id
                    ),
                }
            }
            add(&self.counters.messages, queued);
        }
        Ok(done)
    }
}

pub struct DrainResult {
    pub target: u64,
    pub received: u64,
    pub redelivered: u64,
    pub foreign: u64,
    pub empty_pops: u64,
    pub acked: u64,
    pub ack_failures: u64,
    pub first_ack_error: Option<String>,
    pub elapsed: Duration,
    pub pop_report: PhaseReport,
    pub ack_report: PhaseReport,
}

/// What the consumers share while draining.
struct DrainShared {
    api: Api,
    queue: String,
    params: PopParams,
    expected: Arc<HashSet<String>>,
    seen: Mutex<HashSet<String>>,
    counters: Arc<Counters>,
    first_ack_error: Mutex<Option<String>>,
    target: u64,
    deadline: Instant,
}

/// What one consumer hands back.
struct ConsumerDone {
    pop_latencies: Latencies,
    ack_latencies: Latencies,
    /// When this consumer finished acking its last pop that brought new messages.
    last_progress: Option<Instant>,
}

async fn drain_phase(
    api: &Api,
    cfg: &PushPopConfig,
    queue: &str,
    expected: Arc<HashSet<String>>,
) -> Result<DrainResult> {
    let target = expected.len() as u64;
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let shared = Arc::new(DrainShared {
        api: api.clone(),
        queue: queue.to_owned(),
        params: PopParams {
            batch: cfg.batch,
            partitions: cfg.pop_partitions,
            wait_ms: cfg.wait.then_some(cfg.poll_timeout_ms),
            consumer_group: None,
        },
        seen: Mutex::new(HashSet::with_capacity(expected.len())),
        expected,
        counters: Arc::clone(&counters),
        first_ack_error: Mutex::new(None),
        target,
        deadline: started + Duration::from_secs(cfg.seconds),
    });
    let _progress = spawn_progress("drain", target, Arc::clone(&counters), started);

    let mut tasks = JoinSet::new();
    for _ in 0..cfg.consumers {
        tasks.spawn(consume(Arc::clone(&shared)));
    }
    let mut pop_latencies = Latencies::default();
    let mut ack_latencies = Latencies::default();
    let mut last_progress = None;
    while let Some(joined) = tasks.join_next().await {
        let done = joined.map_err(|e| anyhow!("consumer task panicked: {e}"))??;
        pop_latencies.merge(done.pop_latencies);
        ack_latencies.merge(done.ack_latencies);
        last_progress = last_progress.max(done.last_progress);
    }
    let received = get(&counters.messages);
    // A complete drain ends with the ack of the last new message; consumers still
    // parked in a long poll at that moment must not stretch the measurement.
    let elapsed = match last_progress {
        Some(at) if received >= target => at.duration_since(started),
        _ => started.elapsed(),
    };

    let acked = get(&counters.acked);
    let pop_requests = pop_latencies.len() as u64;
    let ack_requests = ack_latencies.len() as u64;
    let first_ack_error = shared
        .first_ack_error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    eprintln!(
        "drain done: {received}/{target} received in {:.2}s",
        elapsed.as_secs_f64()
    );
    Ok(DrainResult {
        target,
        received,
        redelivered: get(&counters.redelivered),
        foreign: get(&counters.foreign),
        empty_pops: get(&counters.empty_pops),
        acked,
        ack_failures: get(&counters.ack_failures),
        first_ack_error,
        elapsed,
        pop_report: PhaseReport::new("pop", received, pop_requests, elapsed, pop_latencies),
        ack_report: PhaseReport::new("ack", acked, ack_requests, elapsed, ack_latencies),
    })
}

/// One consumer: pop, count, ack — until everything arrived or the deadline passed.
async fn consume(shared: Arc<DrainShared>) -> Result<ConsumerDone> {
    let counters = &shared.counters;
    let mut done = ConsumerDone {
        pop_latencies: Latencies::default(),
        ack_latencies: Latencies::default(),
        last_progress: None,
    };
    while Instant::now() < shared.deadline && get(&counters.messages) < shared.target {
        let sent = Instant::now();
        let messages = shared.api.pop(&shared.queue, &shared.params).await?;
        done.pop_latencies.record(sent.elapsed());
        add(&counters.requests, 1);

        if messages.is_empty() {
            add(&counters.empty_pops, 1);
            tokio::time::sleep(EMPTY_POP_BACKOFF).await;
            continue;
        }

        let (mut new, mut again, mut foreign) = (0, 0, 0);
        {
            let mut seen = shared.seen.lock().unwrap_or_else(PoisonError::into_inner);
            for m in &messages {
                if !shared.expected.contains(&m.transaction_id) {
                    foreign += 1;
                } else if seen.insert(m.transaction_id.clone()) {
                    new += 1;
                } else {
                    again += 1;
                }
            }
        }
        add(&counters.messages, new);
        add(&counters.redelivered, again);
        add(&counters.foreign, foreign);

        // Ack everything that was leased, redeliveries and strangers included,
        // so nothing stays in flight after the run.
        let acks = AckItem::completed_for(&messages);
        if acks.is_empty() {
            if new > 0 {
                done.last_progress = Some(Instant::now());
            }
            continue;
        }
        let sent = Instant::now();
        let outcome = shared
            .api
            .ack_batch(&acks)
            .await
            .with_context(|| format!("acking {} messages", acks.len()))?;
        done.ack_latencies.record(sent.elapsed());
        add(&counters.requests, 1);
        add(&counters.acked, outcome.succeeded);
        add(&counters.ack_failures, outcome.failed);
        if let Some(error) = outcome.first_error {
            shared
                .first_ack_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(error);
        }
        if new > 0 {
            done.last_progress = Some(Instant::now());
        }
    }
    Ok(done)
}

/// Prints one progress line per second to stderr until the guard is dropped.
fn spawn_progress(
    phase: &'static str,
    total: u64,
    counters: Arc<Counters>,
    started: Instant,
) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut tick =
            tokio::time::interval_at(started + Duration::from_secs(1), Duration::from_secs(1));
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut last = (started, 0u64);
        loop {
            let now = tick.tick().await;
            let done = get(&counters.messages);
            let interval = now.duration_since(last.0).as_secs_f64().max(1e-9);
            let rate = done.saturating_sub(last.1) as f64 / interval;
            last = (now, done);
            let mut line = format!(
                "[{phase}] {:>6.1}s {done}/{total} msgs, {rate:.0} msg/s, {} requests",
                now.duration_since(started).as_secs_f64(),
                get(&counters.requests),
            );
            if phase == "drain" {
                line.push_str(&format!(
                    ", {} empty pops, {} redelivered, {} ack failures",
                    get(&counters.empty_pops),
                    get(&counters.redelivered),
                    get(&counters.ack_failures),
                ));
            }
            eprintln!("{line}");
        }
    }))
}
