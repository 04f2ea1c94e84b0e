//! The timer workload: schedulers put keyed timers through
//! `POST /api/v1/timers` on random brokers with delays spread over the run,
//! reschedule some and cancel some (`DELETE /api/v1/timers/{queue}/{key}`),
//! and record every answer; a consumer group pops the destination queue and
//! acks what fired. Each key belongs to one scheduler, so the ops of a key are
//! journaled in the order they were applied.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::{http_client, Control};
use crate::rng::Rng;

/// The destination queue of every timer.
pub const TIMER_QUEUE: &str = "chaos-timers";
/// Its consumer group.
pub const TIMER_GROUP: &str = "tm";
/// Partitions the timers are spread over.
const TIMER_PARTITIONS: usize = 4;
/// Longest delay of one timer.
const MAX_DELAY_MS: u64 = 20_000;
/// Chance that an op on an existing key is a reschedule (else a cancel).
const RESCHEDULE_SHARE: f64 = 0.6;
/// Chance that a scheduler touches one of its pending keys instead of a new one.
const TOUCH_CHANCE: f64 = 0.35;

/// What one timer op asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerAsk {
    /// A schedule (or reschedule: the same upsert) with its own fresh txn.
    Schedule {
        txn: String,
        delay_ms: i64,
    },
    Cancel,
}

/// What the broker answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerAnswer {
    Scheduled {
        rescheduled: bool,
        message_id: String,
        /// The answered `deliverAt`, microseconds since the Unix epoch.
        deliver_at_us: i64,
    },
    Cancelled {
        txn: String,
    },
    Absent,
    TooLate,
    /// A 4xx: refused, nothing applied.
    Refused(String),
    /// No answer (connection lost, timeout, 5xx): applied or not.
    NoAnswer(String),
}

#[derive(Debug, Clone)]
pub struct TimerOp {
    pub key: String,
    pub partition: String,
    pub broker: usize,
    pub ask: TimerAsk,
    pub t_sent: u64,
    pub t_done: u64,
    pub answer: TimerAnswer,
}

/// One message the timer group popped.
#[derive(Debug, Clone)]
pub struct TimerDelivery {
    pub txn: String,
    pub message_id: String,
    pub partition: String,
    /// When the pop answered (run micros).
    pub t_end: u64,
}

/// A fired timer as the segments hold it.
#[derive(Debug, Clone)]
pub struct FiredRow {
    pub partition: String,
    pub offset: i64,
    pub txn: String,
    pub message_id: String,
    /// `created_at`, microseconds since the Unix epoch (database clock).
    pub created_us: i64,
}

/// What the timer workload saw, and what the tables hold at the end.
#[derive(Debug, Default)]
pub struct TimerJournal {
    /// Per key, in the order the ops were sent (one scheduler per key).
    pub ops: Vec<TimerOp>,
    pub deliveries: Vec<TimerDelivery>,
    pub fired: Vec<FiredRow>,
    /// Timer rows still pending after the drain: `(timer_key, txn)`.
    pub pending: Vec<(String, String)>,
    /// Rows of the destination queue's DLQ under `__timer__`.
    pub dead: Vec<(String, String)>,
}

fn partition_of(key: &str) -> String {
    format!(
        "t{}",
        crate::rng::stable_hash(&[key]) % TIMER_PARTITIONS as u64
    )
}

/// One scheduler: new keys, reschedules and cancels until the traffic ends.
/// `traffic_end` bounds every delay, so every timer is due before the drain.
pub async fn scheduler(
    idx: usize,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    traffic_end: Instant,
    mut rng: Rng,
) -> Vec<TimerOp> {
    let Ok(http) = http_client() else {
        return Vec::new();
    };
    let mut log = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut n = 0u64;
    let mut txns = 0u64;
    while !ctl.stop_producers.load(Ordering::Acquire) && Instant::now() < traffic_end {
        let left = traffic_end.saturating_duration_since(Instant::now());
        let touch = !pending.is_empty() && rng.chance(TOUCH_CHANCE);
        let key = if touch {
            pending[rng.index(pending.len())].clone()
        } else {
            n += 1;
            let k = format!("k{idx}-{n:05}");
            pending.push(k.clone());
            k
        };
        let cancel_it = touch && !rng.chance(RESCHEDULE_SHARE);
        if cancel_it {
            pending.retain(|k| k != &key);
        }
        let most = (left.as_millis() as u64).min(MAX_DELAY_MS);
        // some fire at once, the rest anywhere up to the end of the traffic
        let delay_ms = if rng.chance(0.1) {
            0
        } else {
            rng.below(most + 1) as i64
        };
        let partition = partition_of(&key);
        // an op without an answer is sent again (a schedule with a fresh
        // txn) on another broker, up to three times
        let mut broker = rng.index(urls.len());
        for _ in 0..3 {
            let ask = if cancel_it {
                TimerAsk::Cancel
            } else {
                txns += 1;
                TimerAsk::Schedule {
                    txn: format!("tm-{idx}-{txns:06}"),
                    delay_ms,
                }
            };
            let t_sent = ctl.micros();
            let answer = match &ask {
                TimerAsk::Schedule { txn, delay_ms } => {
                    schedule(&http, &urls[broker], &key, &partition, txn, *delay_ms).await
                }
                TimerAsk::Cancel => cancel(&http, &urls[broker], &key).await,
            };
            let again = matches!(answer, TimerAnswer::NoAnswer(_));
            log.push(TimerOp {
                key: key.clone(),
                partition: partition.clone(),
                broker,
                ask,
                t_sent,
                t_done: ctl.micros(),
                answer,
            });
            if !again || Instant::now() >= traffic_end {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            broker = (broker + 1 + rng.index(urls.len() - 1)) % urls.len();
        }
        tokio::time::sleep(Duration::from_millis(rng.between(60, 400))).await;
    }
    log
}

async fn schedule(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    partition: &str,
    txn: &str,
    delay_ms: i64,
) -> TimerAnswer {
    let payload = base64::engine::general_purpose::STANDARD
        .encode(json!({"timer": key, "txn": txn}).to_string());
    let body = json!({"operations": [{"op": "schedule", "queue": TIMER_QUEUE, "timerKey": key,
        "partition": partition, "payload": payload, "delayMs": delay_ms, "txn": txn}]});
    let sent = http
        .post(format!("{url}/api/v1/timers"))
        .json(&body)
        .send()
        .await;
    match read(sent).await {
        Ok(v) => element(&v["results"][0]),
        Err(a) => a,
    }
}

async fn cancel(http: &reqwest::Client, url: &str, key: &str) -> TimerAnswer {
    let sent = http
        .delete(format!("{url}/api/v1/timers/{TIMER_QUEUE}/{key}"))
        .send()
        .await;
    match read(sent).await {
        Ok(v) => element(&v),
        Err(a) => a,
    }
}

/// The JSON of a 200, or the answer a failed call stands for.
async fn read(sent: reqwest::Result<reqwest::Response>) -> Result<Value, TimerAnswer> {
    let resp = sent.map_err(|e| TimerAnswer::NoAnswer(format!("request failed: {e}")))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| TimerAnswer::NoAnswer(format!("body unreadable: {e}")))?;
    if status.is_client_error() {
        return Err(TimerAnswer::Refused(format!("{status}: {text}")));
    }
    if !status.is_success() {
        return Err(TimerAnswer::NoAnswer(format!("{status}: {text}")));
    }
    serde_json::from_str(&text).map_err(|e| TimerAnswer::NoAnswer(format!("not JSON: {e}")))
}

fn element(e: &Value) -> TimerAnswer {
    match e["status"].as_str() {
        Some(s @ ("scheduled" | "rescheduled")) => {
            let at = e["deliverAt"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_micros());
            match (e["messageId"].as_str(), at) {
                (Some(mid), Some(at)) => TimerAnswer::Scheduled {
                    rescheduled: s == "rescheduled",
                    message_id: mid.to_owned(),
                    deliver_at_us: at,
                },
                _ => TimerAnswer::NoAnswer(format!("scheduled without messageId/deliverAt: {e}")),
            }
        }
        Some("cancelled") => TimerAnswer::Cancelled {
            txn: e["txn"].as_str().unwrap_or_default().to_owned(),
        },
        Some("absent") => TimerAnswer::Absent,
        Some("too_late") => TimerAnswer::TooLate,
        _ => TimerAnswer::NoAnswer(format!("unexpected element {e}")),
    }
}

/// One consumer of the timer queue: pops from random brokers, acks at once.
pub async fn consumer(
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    stop: Arc<AtomicBool>,
    mut rng: Rng,
) -> Vec<TimerDelivery> {
    let Ok(http) = http_client() else {
        return Vec::new();
    };
    let mut log = Vec::new();
    while !stop.load(Ordering::Acquire) && Instant::now() < ctl.hard_deadline {
        let url = &urls[rng.index(urls.len())];
        let pop = format!(
            "{url}/api/v1/pop/queue/{TIMER_QUEUE}?consumerGroup={TIMER_GROUP}&batch=10&partitions=2&wait=true&timeout=1000"
        );
        let Ok(msgs) = pop_once(&http, &pop).await else {
            tokio::time::sleep(Duration::from_millis(rng.between(50, 250))).await;
            continue;
        };
        let t_end = ctl.micros();
        if msgs.is_empty() {
            continue;
        }
        let acks: Vec<Value> = msgs
            .iter()
            .map(|m| {
                log.push(TimerDelivery {
                    txn: m["transactionId"].as_str().unwrap_or_default().to_owned(),
                    message_id: m["id"].as_str().unwrap_or_default().to_owned(),
                    partition: m["partition"].as_str().unwrap_or_default().to_owned(),
                    t_end,
                });
                json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                       "leaseId": m["leaseId"], "status": "completed"})
            })
            .collect();
        let url = &urls[rng.index(urls.len())];
        // an ack without an answer is left to the lease: the batch comes again
        let _ = http
            .post(format!("{url}/api/v1/ack/batch"))
            .json(&json!({"consumerGroup": TIMER_GROUP, "acknowledgments": acks}))
            .send()
            .await;
    }
    log
}

async fn pop_once(http: &reqwest::Client, url: &str) -> Result<Vec<Value>, String> {
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    if resp.status().as_u16() == 204 {
        return Ok(Vec::new());
    }
    let ok = resp.status().is_success();
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if !ok || v["success"] != true {
        return Err(format!("pop answered {v}"));
    }
    Ok(v["messages"].as_array().cloned().unwrap_or_default())
}

/// True when no timer of the queue is pending and the group's cursor is at
/// the end of every partition with no live lease.
pub async fn drained(db: &tokio_postgres::Client) -> Result<bool> {
    let row = db
        .query_one(
            "SELECT (SELECT count(*) FROM queen.timers WHERE queue = $1)
                  + (SELECT count(*) FROM queen.partitions pt
                       JOIN queen.queues q ON q.id = pt.queue_id
                       LEFT JOIN queen.log_consumers lc
                              ON lc.partition_id = pt.id AND lc.consumer_group = $2
                      WHERE q.name = $1 AND pt.next_offset > 1
                        AND (lc.committed_offset IS DISTINCT FROM pt.next_offset - 1
                             OR lc.lease_expires_at > now()))",
            &[&TIMER_QUEUE, &TIMER_GROUP],
        )
        .await
        .context("timer drain state")?;
    Ok(row.get::<_, i64>(0) == 0)
}

/// Reads what fired, what is still pending and the timer dead letters.
pub async fn snapshot(db: &tokio_postgres::Client, journal: &mut TimerJournal) -> Result<()> {
    journal.fired = crate::dbstate::queue_messages(db, TIMER_QUEUE)
        .await?
        .into_iter()
        .map(|m| FiredRow {
            partition: m.partition,
            offset: m.offset,
            txn: m.txid,
            message_id: m.message_id,
            created_us: m.created_us,
        })
        .collect();
    journal.pending = db
        .query(
            "SELECT timer_key, txn FROM queen.timers WHERE queue = $1",
            &[&TIMER_QUEUE],
        )
        .await
        .context("read pending timers")?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    journal.dead = db
        .query(
            "SELECT d.transaction_id, coalesce(d.error_message, '')
               FROM queen.dead_letters d
               JOIN queen.partitions pt ON pt.id = d.partition_id
               JOIN queen.queues q ON q.id = pt.queue_id
              WHERE q.name = $1 AND d.consumer_group = '__timer__'",
            &[&TIMER_QUEUE],
        )
        .await
        .context("read timer dead letters")?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Ok(())
}
