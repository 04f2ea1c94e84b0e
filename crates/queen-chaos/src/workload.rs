//! Producers and consumers. Producers push uniquely numbered messages to
//! partitions they own (so each partition has one sequential writer), repeat
//! some transactionIds on purpose, retry unanswered pushes with the same ids,
//! and record what every attempt was told. Consumers in several groups pop from
//! random brokers, ack on random brokers, fail some messages on purpose (poison
//! ones always, flaky ones once), abandon some batches, and hold some past the
//! lease.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::journal::{
    AckEvent, AckItem, AckOutcome, Delivery, Handling, ItemKind, PopEvent, PushEvent, Told,
};
use crate::rng::{stable_hash, Rng};

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

struct Item {
    partition: String,
    txid: String,
    payload: Value,
    kind: ItemKind,
}

/// One producer: owns partitions `i` with `i % producers == idx`.
pub async fn producer(
    idx: usize,
    cfg: Arc<WorkloadConfig>,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    mut rng: Rng,
) -> Vec<PushEvent> {
    let http = match http_client() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("producer {idx}: {e:#}");
            return Vec::new();
        }
    };
    let owned: Vec<usize> = (0..cfg.partitions)
        .filter(|p| p % cfg.producers == idx)
        .collect();
    if owned.is_empty() {
        return Vec::new();
    }
    // per owned partition: the items pushed so far (for repeats)
    let mut sent: Vec<Vec<(String, Value)>> = vec![Vec::new(); owned.len()];
    let mut log = Vec::new();
    let per_producer = (cfg.max_messages / cfg.producers as u64).max(1);
    let mut fresh = 0u64;
    // average 2.5 items per request
    let pace = Duration::from_secs_f64(2.5 * cfg.producers as f64 / cfg.rate.max(0.1));
    let mut next_at = Instant::now();
    while !ctl.stop_producers.load(Ordering::Acquire)
        && !ctl.past_deadline()
        && fresh < per_producer
    {
        let n = rng.between(1, 4);
        let mut items = Vec::new();
        for _ in 0..n {
            let slot = rng.index(owned.len());
            let partition = partition_name(owned[slot]);
            if !sent[slot].is_empty() && rng.chance(REPEAT_CHANCE) {
                let (txid, payload) = sent[slot][rng.index(sent[slot].len())].clone();
                items.push(Item {
                    partition,
                    txid,
                    payload,
                    kind: ItemKind::Repeat,
                });
                continue;
            }
            fresh += 1;
            let seq = sent[slot].len();
            let txid = format!("{partition}-w{idx}-{seq:06}");
            let payload =
                json!({"txid": txid, "partition": partition, "producer": idx, "seq": seq});
            sent[slot].push((txid.clone(), payload.clone()));
            let twice = rng.chance(IN_REQUEST_REPEAT_CHANCE);
            items.push(Item {
                partition: partition.clone(),
                txid: txid.clone(),
                payload: payload.clone(),
                kind: ItemKind::Fresh,
            });
            if twice {
                items.push(Item {
                    partition,
                    txid,
                    payload,
                    kind: ItemKind::InRequestRepeat,
                });
            }
        }
        push_with_retries(
            idx, &cfg.queue, &items, &http, &urls, &ctl, &mut rng, &mut log,
        )
        .await;
        next_at += pace.mul_f64(n as f64 / 2.5);
        let now = Instant::now();
        if next_at > now {
            tokio::time::sleep(next_at - now).await;
        } else {
            next_at = now;
        }
    }
    log
}

#[expect(
    clippy::too_many_arguments,
    reason = "the producer's loop state, passed down once"
)]
async fn push_with_retries(
    producer: usize,
    queue: &str,
    items: &[Item],
    http: &reqwest::Client,
    urls: &[String],
    ctl: &Control,
    rng: &mut Rng,
    log: &mut Vec<PushEvent>,
) {
    let body = json!({"items": items.iter().map(|i| json!({
        "queue": queue, "partition": i.partition, "transactionId": i.txid, "payload": i.payload,
    })).collect::<Vec<_>>()});
    let mut broker = rng.index(urls.len());
    for attempt in 0..PUSH_ATTEMPTS {
        let t_sent = ctl.micros();
        let answer = send_push(http, &urls[broker], &body, items.len()).await;
        let t_done = ctl.micros();
        let told: Vec<Told> = match &answer {
            Ok(v) => v.clone(),
            Err(e) => vec![Told::NoAnswer(e.clone()); items.len()],
        };
        let vouched = told.iter().filter(|t| t.vouches()).count() as u64;
        ctl.vouched.fetch_add(vouched, Ordering::Relaxed);
        for (pos, (item, told)) in items.iter().zip(told).enumerate() {
            log.push(PushEvent {
                producer,
                partition: item.partition.clone(),
                txid: item.txid.clone(),
                payload: item.payload.clone(),
                kind: item.kind,
                broker,
                attempt,
                pos,
                t_sent,
                t_done,
                told,
            });
        }
        if answer.is_ok() || ctl.past_deadline() {
            return;
        }
        let backoff = 100u64 << attempt.min(4);
        tokio::time::sleep(Duration::from_millis(backoff)).await;
        broker = (broker + 1 + rng.index(urls.len() - 1)) % urls.len();
    }
}

/// Sends one push; per-item answers on 201, the reason otherwise.
async fn send_push(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    n: usize,
) -> Result<Vec<Told>, String> {
    let resp = http
        .post(format!("{url}/api/v1/push"))
        .json(body)
        .send()
        .await
        .map_err(|e| format!("push request failed: {e}"))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("push body unreadable: {e}"))?;
    if status.as_u16() != 201 {
        return Err(format!("push answered {status}: {text}"));
    }
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("push body not JSON: {e}"))?;
    let Some(arr) = v.as_array().filter(|a| a.len() == n) else {
        return Err(format!("push answered 201 with an unexpected body: {text}"));
    };
    Ok(arr
        .iter()
        .map(|r| {
            let mid = r["message_id"].as_str().unwrap_or_default().to_owned();
            match r["status"].as_str() {
                Some("queued") => Told::Queued { message_id: mid },
                Some("duplicate") => Told::Duplicate { message_id: mid },
                Some("buffered") => Told::Buffered,
                Some("failed") => Told::Failed(r["error"].as_str().unwrap_or("?").to_owned()),
                other => Told::Failed(format!("unknown status {other:?}")),
            }
        })
        .collect())
}

/// What a consumer records: pops and acks.
#[derive(Debug, Default)]
pub struct ConsumerLog {
    pub pops: Vec<PopEvent>,
    pub acks: Vec<AckEvent>,
    pub extends: (u64, u64),
}

/// Batches one consumer may hold (paused, extended, slow) while it goes on
/// popping; past this it waits for the oldest.
const MAX_HELD: usize = 4;

/// Everything needed to process one popped batch, owned so it can run in a
/// task of its own while the consumer goes on.
struct Batch {
    group: usize,
    consumer: usize,
    messages: Vec<Delivery>,
    handling: Handling,
    drain: bool,
    cfg: Arc<WorkloadConfig>,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    http: reqwest::Client,
    rng: Rng,
}

/// What processing a batch recorded.
#[derive(Debug, Default)]
struct Processed {
    acks: Vec<AckEvent>,
    extends: (u64, u64),
}

/// One consumer of group `group`.
pub async fn consumer(
    group: usize,
    idx: usize,
    cfg: Arc<WorkloadConfig>,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    mut rng: Rng,
) -> ConsumerLog {
    let mut log = ConsumerLog::default();
    let http = match http_client() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("consumer {group}/{idx}: {e:#}");
            return log;
        }
    };
    let gname = &cfg.groups[group];
    let mut held: std::collections::VecDeque<tokio::task::JoinHandle<Processed>> =
        std::collections::VecDeque::new();
    let mut forks = 0u64;
    while !ctl.stop_consumers.load(Ordering::Acquire) && !ctl.past_deadline() {
        let broker = rng.index(urls.len());
        let batch = rng.between(1, cfg.max_batch);
        // mostly wildcard pops over up to 3 partitions, sometimes one named partition
        let url = if rng.chance(NAMED_PARTITION_CHANCE) {
            let p = partition_name(rng.index(cfg.partitions));
            format!(
                "{}/api/v1/pop/queue/{}/partition/{p}?consumerGroup={gname}&batch={batch}&wait=true&timeout=500",
                urls[broker], cfg.queue
            )
        } else {
            let parts = rng.between(1, 3);
            format!(
                "{}/api/v1/pop/queue/{}?consumerGroup={gname}&batch={batch}&partitions={parts}&wait=true&timeout=1000",
                urls[broker], cfg.queue
            )
        };
        let t_start = ctl.micros();
        let Ok(messages) = pop(&http, &url).await else {
            tokio::time::sleep(Duration::from_millis(rng.between(50, 250))).await;
            continue;
        };
        let t_end = ctl.micros();
        if messages.is_empty() {
            continue;
        }
        ctl.delivered
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        let drain = ctl.drain_mode.load(Ordering::Acquire);
        let handling = if drain {
            Handling::Acked
        } else if ctl.pause[group][idx].swap(false, Ordering::AcqRel) || rng.chance(PAUSE_CHANCE) {
            Handling::Paused
        } else if rng.chance(ABANDON_CHANCE) {
            Handling::Abandoned
        } else if rng.chance(EXTEND_CHANCE) {
            Handling::Extended
        } else if rng.chance(SLOW_CHANCE) {
            Handling::Slow
        } else {
            Handling::Acked
        };
        log.pops.push(PopEvent {
            group,
            consumer: idx,
            broker,
            t_start,
            t_end,
            messages: messages.clone(),
            handling,
        });
        if handling == Handling::Abandoned {
            continue;
        }
        forks += 1;
        let work = Batch {
            group,
            consumer: idx,
            messages,
            handling,
            drain,
            cfg: cfg.clone(),
            urls: urls.clone(),
            ctl: ctl.clone(),
            http: http.clone(),
            rng: rng.fork(forks),
        };
        if handling == Handling::Acked {
            let done = process(work).await;
            log.acks.extend(done.acks);
            continue;
        }
        // a held batch runs on its own; the consumer goes on popping
        if held.len() >= MAX_HELD {
            if let Some(h) = held.pop_front() {
                collect(&mut log, h).await;
            }
        }
        held.push_back(tokio::spawn(process(work)));
    }
    for h in held {
        collect(&mut log, h).await;
    }
    log
}

async fn collect(log: &mut ConsumerLog, h: tokio::task::JoinHandle<Processed>) {
    // a held batch sleeps at most a few seconds, then acks with timeouts
    if let Ok(Ok(done)) = tokio::time::timeout(Duration::from_secs(60), h).await {
        log.acks.extend(done.acks);
        log.extends.0 += done.extends.0;
        log.extends.1 += done.extends.1;
    }
}

/// Holds the batch as its handling says, decides per message, and acks.
async fn process(b: Batch) -> Processed {
    let Batch {
        group,
        consumer,
        messages,
        handling,
        drain,
        cfg,
        urls,
        ctl,
        http,
        mut rng,
    } = b;
    let mut out = Processed::default();
    let gname = &cfg.groups[group];
    let mut extended_until = None;
    match handling {
        Handling::Abandoned => return out,
        Handling::Paused => {
            tokio::time::sleep(Duration::from_millis(cfg.lease_secs * 1000 + 1500)).await;
        }
        Handling::Extended => {
            // extend on some broker to 3 leases, then hold past the original lease
            let secs = cfg.lease_secs * 3;
            let b = rng.index(urls.len());
            let asked = ctl.micros();
            out.extends.0 += 1;
            if extend(&http, &urls[b], &messages[0].lease_id, secs).await {
                out.extends.1 += 1;
                extended_until = Some(asked + secs * 1_000_000);
                tokio::time::sleep(Duration::from_millis(cfg.lease_secs * 1000 + 500)).await;
            }
        }
        Handling::Slow => {
            let ms = (cfg.lease_secs * 1000).saturating_sub(300) + rng.below(600);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Handling::Acked => {}
    }
    // decide per message, in order per partition; the first failure in a
    // partition ends its part of the batch (the rest is redelivered after
    // it, as the official clients do)
    let mut plan: Vec<(&Delivery, &'static str)> = Vec::new();
    let mut stopped: HashSet<&str> = HashSet::new();
    for m in &messages {
        if stopped.contains(m.partition_id.as_str()) {
            continue;
        }
        let fail = is_poison(gname, &m.partition, &m.txid)
            || (!drain
                && is_flaky(gname, &m.partition, &m.txid)
                && ctl.first_flaky_failure(group, &m.partition, &m.txid));
        plan.push((m, if fail { "failed" } else { "completed" }));
        if fail {
            stopped.insert(m.partition_id.as_str());
        }
    }
    let body = json!({"consumerGroup": gname, "acknowledgments": plan.iter().map(|(m, st)| json!({
        "transactionId": m.txid, "partitionId": m.partition_id, "leaseId": m.lease_id,
        "status": st, "error": if *st == "failed" { Value::from("chaos: failed on purpose") } else { Value::Null },
    })).collect::<Vec<_>>()});
    // one retry on another broker when the first ack gets no answer
    let mut b = rng.index(urls.len());
    for attempt in 0..2 {
        let t_start = ctl.micros();
        let outcome = send_ack(&http, &urls[b], &body, plan.len()).await;
        let t_end = ctl.micros();
        let answered = outcome.is_ok();
        let outcomes = match outcome {
            Ok(o) => o,
            Err(e) => vec![AckOutcome::NoAnswer(e); plan.len()],
        };
        out.acks.push(AckEvent {
            group,
            attempt,
            consumer,
            broker: b,
            t_start,
            t_end,
            late: handling == Handling::Paused,
            extended_until,
            items: plan
                .iter()
                .zip(outcomes)
                .map(|((m, st), outcome)| AckItem {
                    partition_id: m.partition_id.clone(),
                    txid: m.txid.clone(),
                    status: st,
                    outcome,
                })
                .collect(),
        });
        if answered || attempt == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        b = (b + 1) % urls.len();
    }
    out
}

async fn pop(http: &reqwest::Client, url: &str) -> Result<Vec<Delivery>, String> {
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if status == 204 {
        return Ok(Vec::new());
    }
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if status != 200 || v["success"] != true {
        return Err(format!("pop answered {status}: {v}"));
    }
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    Ok(msgs
        .iter()
        .map(|m| Delivery {
            partition_id: m["partitionId"].as_str().unwrap_or_default().to_owned(),
            partition: m["partition"].as_str().unwrap_or_default().to_owned(),
            txid: m["transactionId"].as_str().unwrap_or_default().to_owned(),
            message_id: m["id"].as_str().unwrap_or_default().to_owned(),
            lease_id: m["leaseId"].as_str().unwrap_or_default().to_owned(),
            data: m["data"].clone(),
        })
        .collect())
}

async fn extend(http: &reqwest::Client, url: &str, lease: &str, secs: u64) -> bool {
    let Ok(resp) = http
        .post(format!("{url}/api/v1/lease/{lease}/extend"))
        .json(&json!({"seconds": secs}))
        .send()
        .await
    else {
        return false;
    };
    // one object from this broker; the 0.15 contract's one-element array is read too
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    let r = if v.is_array() { &v[0] } else { &v };
    r["success"] == true
}

async fn send_ack(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
    n: usize,
) -> Result<Vec<AckOutcome>, String> {
    let resp = http
        .post(format!("{url}/api/v1/ack/batch"))
        .json(body)
        .send()
        .await
        .map_err(|e| format!("ack request failed: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let Some(arr) = v.as_array().filter(|a| status.is_success() && a.len() == n) else {
        return Err(format!("ack answered {status}: {text}"));
    };
    let mut out = vec![AckOutcome::NoAnswer("missing".into()); n];
    for (i, r) in arr.iter().enumerate() {
        let at = r["index"].as_u64().map_or(i, |x| x as usize).min(n - 1);
        out[at] = if r["success"] == true {
            AckOutcome::Ok {
                dlq: r["dlq"] == true,
            }
        } else {
            AckOutcome::Refused(r["error"].as_str().unwrap_or("(no error text)").to_owned())
        };
    }
    Ok(out)
}
