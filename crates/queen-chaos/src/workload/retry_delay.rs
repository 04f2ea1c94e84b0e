//! The retry-delay workload: a queue with `retryDelay`, a backoff and a cap,
//! one producer writing numbered messages to a few partitions, and consumers
//! of one group on random brokers that fail some messages (each on its first
//! two deliveries) and abandon some batches (their lease runs out). Every pop
//! answer and every ack is recorded on the harness clock, which brackets the
//! database's: `check::retry_delay` holds them to the delays, FIFO per
//! partition (against the offsets stored), and nothing lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::Control;
use crate::rng::{stable_hash, Rng};

/// The queue of the workload and its one consumer group.
pub const RETRY_QUEUE: &str = "chaos-retry";
pub const RETRY_GROUP: &str = "retry";
/// The queue's retry schedule: 250 ms, doubling, at most 1 s.
pub const DELAY_MS: i64 = 250;
pub const BACKOFF: f64 = 2.0;
pub const DELAY_MAX_MS: i64 = 1_000;
/// Short, so abandoned batches come back within the run.
const LEASE_SECS: u64 = 3;
const PARTITIONS: usize = 4;
const CONSUMERS: usize = 2;
/// Messages per second the producer writes, over all partitions.
const RATE: f64 = 12.0;
/// Parts per thousand of messages failed on their first two deliveries.
const FAILING_PERMILLE: u64 = 120;
/// Chance that a consumer abandons a batch (no ack: the lease expires).
const ABANDON_CHANCE: f64 = 0.03;
/// The longest the consumers drain after the traffic.
const DRAIN: Duration = Duration::from_secs(40);

/// The wait after delivery attempt `n` failed: `retry_wait` of the queue.
pub fn wait_ms(n: i64) -> f64 {
    let grown = DELAY_MS as f64 * BACKOFF.powi(i32::try_from(n.clamp(1, 64) - 1).unwrap_or(63));
    grown.min(DELAY_MAX_MS as f64)
}

/// Whether `txid` is one of the messages consumers fail.
pub fn is_failing(txid: &str) -> bool {
    stable_hash(&["retry", txid]) % 1000 < FAILING_PERMILLE
}

/// One pop answer with messages (one partition: pops claim one).
#[derive(Debug, Clone)]
pub struct RetryPop {
    pub partition: String,
    /// Harness µs when the request left and when its answer came.
    pub t_sent: u64,
    pub t_done: u64,
    /// `(transactionId, deliveryAttempt)` in the answer's order.
    pub messages: Vec<(String, i64)>,
}

/// One ack item sent.
#[derive(Debug, Clone)]
pub struct RetryAck {
    pub partition: String,
    pub txid: String,
    pub completed: bool,
    pub t_sent: u64,
}

/// What the checker reads.
#[derive(Debug, Default)]
pub struct RetryJournal {
    pub pops: Vec<RetryPop>,
    pub acks: Vec<RetryAck>,
    /// transactionIds a push answered queued, duplicate or buffered.
    pub pushed: Vec<String>,
    /// `(partition, transactionId)` of every stored message, in offset order.
    pub stored: Vec<(String, String)>,
    /// Partitions whose group cursor is short of the end after the drain,
    /// with how many messages it is short.
    pub behind: Vec<(String, i64)>,
}

/// The running workload.
pub struct RetryRun {
    producer: JoinHandle<Vec<String>>,
    consumers: Vec<JoinHandle<(Vec<RetryPop>, Vec<RetryAck>)>>,
}

/// Configures the queue and starts the producer and the consumers.
pub async fn start(
    http: &reqwest::Client,
    urls: &Arc<Vec<String>>,
    ctl: &Arc<Control>,
    traffic_end: Instant,
    rng: &mut Rng,
) -> Result<RetryRun> {
    let options = json!({"leaseTime": LEASE_SECS, "retryLimit": 100, "retryDelay": DELAY_MS,
                         "retryBackoff": BACKOFF, "retryDelayMax": DELAY_MAX_MS});
    let resp = http
        .post(format!("{}/api/v1/configure", urls[0]))
        .json(&json!({"queue": RETRY_QUEUE, "options": options}))
        .send()
        .await?;
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    if v["configured"] != true {
        bail!("configure {RETRY_QUEUE} answered {v}");
    }
    let deadline = traffic_end + DRAIN;
    let produced = Arc::new(AtomicBool::new(false));
    Ok(RetryRun {
        producer: tokio::spawn(producer(
            urls.clone(),
            ctl.clone(),
            traffic_end,
            produced.clone(),
        )),
        consumers: (0..CONSUMERS)
            .map(|i| {
                tokio::spawn(consumer(
                    urls.clone(),
                    ctl.clone(),
                    (traffic_end, deadline),
                    produced.clone(),
                    rng.fork(9000 + i as u64),
                ))
            })
            .collect(),
    })
}

impl RetryRun {
    /// Joins the workers (the consumers stop once everything was consumed or
    /// the drain ran out) and reads what was stored and where the cursors are.
    pub async fn finish(self, db: &tokio_postgres::Client) -> Result<RetryJournal> {
        let mut j = RetryJournal {
            pushed: self.producer.await.context("retry producer")?,
            ..RetryJournal::default()
        };
        for h in self.consumers {
            let (pops, acks) = tokio::time::timeout(DRAIN + Duration::from_secs(30), h)
                .await
                .context("a retry consumer did not stop")?
                .context("retry consumer")?;
            j.pops.extend(pops);
            j.acks.extend(acks);
        }
        j.stored = crate::dbstate::queue_messages(db, RETRY_QUEUE)
            .await?
            .into_iter()
            .map(|m| (m.partition, m.txid))
            .collect();
        j.behind = behind(db).await?;
        Ok(j)
    }
}

/// Partitions of the queue whose group cursor is short of the end.
async fn behind(db: &tokio_postgres::Client) -> Result<Vec<(String, i64)>> {
    Ok(db
        .query(
            "SELECT pt.name,
                    pt.next_offset - 1 - greatest(coalesce(lc.committed_offset, pt.low_offset - 1),
                                                  pt.low_offset - 1) AS left
               FROM queen.partitions pt
               JOIN queen.queues q ON q.id = pt.queue_id
               LEFT JOIN queen.log_consumers lc
                      ON lc.partition_id = pt.id AND lc.consumer_group = $2
              WHERE q.name = $1",
            &[&RETRY_QUEUE, &RETRY_GROUP],
        )
        .await
        .context("read the retry group's cursors")?
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .filter(|(_, left)| *left > 0)
        .collect())
}

/// Whether every partition's cursor reached its end.
async fn drained(http: &reqwest::Client, urls: &[String]) -> bool {
    for url in urls {
        let path = format!("{url}/api/v1/resources/queues/{RETRY_QUEUE}/depth?group={RETRY_GROUP}");
        if let Ok(resp) = http.get(path).send().await {
            if let Ok(v) = resp.json::<Value>().await {
                if let Some(pending) = v["pending"].as_i64() {
                    return pending == 0;
                }
            }
        }
    }
    false
}

/// Writes `rd-<p>-<i>` to partition `p`, one item a request, each partition
/// always through the same broker (a spooled push and a later one of its
/// partition keep their order there), retrying an unanswered push with the
/// same transactionId; until the traffic ends.
async fn producer(
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    traffic_end: Instant,
    done: Arc<AtomicBool>,
) -> Vec<String> {
    let pushed = produce(&urls, &ctl, traffic_end).await;
    done.store(true, Ordering::Release);
    pushed
}

async fn produce(urls: &[String], ctl: &Control, traffic_end: Instant) -> Vec<String> {
    let Ok(http) = super::http_client() else {
        return Vec::new();
    };
    let mut pushed = Vec::new();
    let mut next = [0u64; PARTITIONS];
    let pause = Duration::from_secs_f64(1.0 / RATE);
    let mut turn = 0usize;
    while Instant::now() < traffic_end && !ctl.past_deadline() {
        let p = turn % PARTITIONS;
        turn += 1;
        let txid = format!("rd-{p}-{}", next[p]);
        let body = json!({"items": [{"queue": RETRY_QUEUE, "partition": format!("p{p}"),
                                     "transactionId": txid, "payload": {"n": next[p]}}]});
        let url = &urls[p % urls.len()];
        loop {
            if Instant::now() >= traffic_end + DRAIN || ctl.past_deadline() {
                return pushed;
            }
            let answer = match http
                .post(format!("{url}/api/v1/push"))
                .json(&body)
                .send()
                .await
            {
                Ok(resp) => resp.json::<Value>().await.ok(),
                Err(_) => None,
            };
            let status = answer
                .as_ref()
                .and_then(|v| v[0]["status"].as_str().map(str::to_owned));
            if matches!(status.as_deref(), Some("queued" | "duplicate" | "buffered")) {
                pushed.push(txid);
                next[p] += 1;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(pause).await;
    }
    pushed
}

/// Pops from random brokers and acks: fails the first message of a batch on
/// its first two deliveries when it is a failing one, abandons some batches,
/// completes the rest; after the traffic, until the queue is consumed.
async fn consumer(
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    (traffic_end, deadline): (Instant, Instant),
    produced: Arc<AtomicBool>,
    mut rng: Rng,
) -> (Vec<RetryPop>, Vec<RetryAck>) {
    let (mut pops, mut acks) = (Vec::new(), Vec::new());
    let Ok(http) = super::http_client() else {
        return (pops, acks);
    };
    let mut idle = 0u32;
    while Instant::now() < deadline && !ctl.past_deadline() {
        let url = &urls[rng.index(urls.len())];
        let t_sent = ctl.micros();
        let path = format!(
            "{url}/api/v1/pop/queue/{RETRY_QUEUE}?consumerGroup={RETRY_GROUP}&batch=3&wait=true&timeout=1000"
        );
        let answer = match http.get(path).send().await {
            Ok(resp) if resp.status() == reqwest::StatusCode::OK => resp.json::<Value>().await.ok(),
            _ => None,
        };
        let t_done = ctl.micros();
        let msgs: Vec<Value> = answer
            .as_ref()
            .and_then(|v| v["messages"].as_array().cloned())
            .unwrap_or_default();
        if msgs.is_empty() {
            idle += 1;
            // after the traffic: stop once the group consumed everything
            if produced.load(Ordering::Acquire)
                && idle.is_multiple_of(4)
                && drained(&http, &urls).await
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        idle = 0;
        let text = |m: &Value, k: &str| m[k].as_str().unwrap_or_default().to_owned();
        let partition = text(&msgs[0], "partition");
        pops.push(RetryPop {
            partition: partition.clone(),
            t_sent,
            t_done,
            messages: msgs
                .iter()
                .map(|m| {
                    (
                        text(m, "transactionId"),
                        m["deliveryAttempt"].as_i64().unwrap_or(0),
                    )
                })
                .collect(),
        });
        let draining = Instant::now() >= traffic_end;
        if !draining && rng.chance(ABANDON_CHANCE) {
            continue;
        }
        let head = &msgs[0];
        let fail = !draining
            && is_failing(&text(head, "transactionId"))
            && head["deliveryAttempt"].as_i64().unwrap_or(0) <= 2;
        let items: Vec<&Value> = if fail {
            vec![head]
        } else {
            msgs.iter().collect()
        };
        let status = if fail { "failed" } else { "completed" };
        let body = json!({"consumerGroup": RETRY_GROUP, "acknowledgments": items.iter().map(|m| json!({
            "transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "leaseId": m["leaseId"], "status": status}))
            .collect::<Vec<_>>()});
        let t_ack = ctl.micros();
        for m in &items {
            acks.push(RetryAck {
                partition: partition.clone(),
                txid: text(m, "transactionId"),
                completed: !fail,
                t_sent: t_ack,
            });
        }
        let url = &urls[rng.index(urls.len())];
        // an ack that gets no answer is left: the lease expires, which is a
        // failed delivery too
        let _ = http
            .post(format!("{url}/api/v1/ack/batch"))
            .json(&body)
            .send()
            .await;
    }
    (pops, acks)
}
