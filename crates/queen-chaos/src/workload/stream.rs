//! Stream workers: a keyed count over the `chaos` queue, driven through
//! `/streams/v1` the way the official streaming SDK (`queen-mq` 2.6.0,
//! `queen/streams/runtime/runner.py`) drives it.
//!
//! Every worker registers the query `chaos-count` (same config hash, so every
//! registration after the first answers `fresh:false`), then loops: pop a
//! leased batch from the source with the query's group `streams.chaos-count`
//! (batch 200, up to 4 partitions, `wait=true`), and per partition of the
//! batch: order the messages as the SDK does (by `createdAt` to the
//! millisecond, then message id), read the partition's state
//! (`state/get` with `keys: []`), count the messages per key, and commit one
//! `POST /streams/v1/cycle` holding an upsert of each touched key's count,
//! one sink push per touched key (`{key, inc, total, src, cycle}`) and the ack
//! of the last message with `count` = the group's size. Each call goes to a
//! random broker and is retried like the SDK's HTTP client does (5xx, 408,
//! 429 and transport errors, 3 retries, backoff from 100 ms to 5 s), here on
//! another random broker each time. Now and then a worker stalls past the
//! lease before its cycle (which must then be refused) or drops a group
//! without a cycle (the lease expires, the messages come again).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::{http_client, Control};
use crate::rng::{stable_hash, Rng};

/// The query's name; the SDK's default consumer group is `streams.<name>`.
pub const QUERY: &str = "chaos-count";
/// The sink queue (created by the first cycle that pushes to it).
pub const SINK: &str = "chaos-count-sink";
/// Distinct keys of the keyed count.
const KEYS: u64 = 6;
/// The SDK runner's defaults.
const BATCH: u64 = 200;
const MAX_PARTITIONS: u64 = 4;
/// Attempts of one call: the SDK client's first try and 3 retries.
const ATTEMPTS: u32 = 4;
/// Chance that a worker stalls past the lease between reading the state and
/// committing the cycle.
const STALL_CHANCE: f64 = 0.02;
/// Chance that a worker drops a partition group without a cycle.
const DROP_CHANCE: f64 = 0.01;

/// The consumer group of the query on the source queue.
pub fn group() -> String {
    format!("streams.{QUERY}")
}

/// The key the count uses for a source message (a pure function of the
/// message, like a `key_by`).
pub fn stream_key(partition: &str, txid: &str) -> String {
    format!("k{}", stable_hash(&["stream-key", partition, txid]) % KEYS)
}

/// What the client learnt about one cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CycleOutcome {
    /// Answered `success: true`, with the sink message ids.
    Committed { message_ids: Vec<String> },
    /// Refused (4xx, or 200 with `success: false`) and no earlier attempt was
    /// left without an answer: nothing may have been written.
    Refused { status: u16, code: String },
    /// No definite answer: some attempt got no answer or a 5xx, so it may
    /// have been applied.
    Unknown(String),
}

/// One cycle as the worker sent it.
#[derive(Debug, Clone)]
pub struct CycleEvent {
    pub worker: usize,
    /// Named in every sink payload of the cycle.
    pub cycle: String,
    pub partition_id: String,
    pub partition: String,
    pub lease_id: String,
    /// The source messages of the cycle, in the order processed.
    pub txids: Vec<String>,
    /// Brokers of the attempts, in order.
    pub brokers: Vec<usize>,
    pub t_start: u64,
    pub t_end: u64,
    pub outcome: CycleOutcome,
}

/// What a stream worker recorded.
#[derive(Debug, Default)]
pub struct StreamLog {
    pub cycles: Vec<CycleEvent>,
    pub pops: u64,
    pub delivered: u64,
    pub state_reads_failed: u64,
    pub stalls: u64,
    pub drops: u64,
    pub registrations: u64,
}

impl StreamLog {
    /// Adds another worker's log to this one.
    pub fn absorb(&mut self, o: StreamLog) {
        self.cycles.extend(o.cycles);
        self.pops += o.pops;
        self.delivered += o.delivered;
        self.state_reads_failed += o.state_reads_failed;
        self.stalls += o.stalls;
        self.drops += o.drops;
        self.registrations += o.registrations;
    }

    /// One summary line.
    pub fn describe(&self, workers: usize) -> String {
        format!(
            "  streams: {workers} workers, {} registrations, {} pops delivering {} messages, {} state reads failed, {} stalls past the lease, {} groups dropped without a cycle",
            self.registrations, self.pops, self.delivered, self.state_reads_failed, self.stalls, self.drops
        )
    }

    /// Every cycle as one line, for diagnosis.
    pub fn dump(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let mut cycles: Vec<&CycleEvent> = self.cycles.iter().collect();
        cycles.sort_by_key(|c| c.t_start);
        for c in cycles {
            let _ = writeln!(
                s,
                "cycle\tworker={}\tbrokers={:?}\tstart={:.6}\tend={:.6}\t{}\t{} ({})\tlease={}\t{:?}\t{}",
                c.worker,
                c.brokers,
                c.t_start as f64 / 1e6,
                c.t_end as f64 / 1e6,
                c.cycle,
                c.partition,
                c.partition_id,
                c.lease_id,
                c.outcome,
                c.txids.join(",")
            );
        }
        s
    }
}

/// A message of a popped batch, as the runner reads it.
#[derive(Debug, Clone)]
struct SourceMsg {
    partition_id: String,
    partition: String,
    txid: String,
    id: String,
    lease_id: String,
    created_ms: String,
}

/// One stream worker.
pub async fn stream_worker(
    idx: usize,
    queue: String,
    lease_secs: u64,
    urls: Arc<Vec<String>>,
    ctl: Arc<Control>,
    mut rng: Rng,
) -> StreamLog {
    let mut log = StreamLog::default();
    let http = match http_client() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("stream worker {idx}: {e:#}");
            return log;
        }
    };
    let stopped = || ctl.stop_consumers.load(Ordering::Acquire) || ctl.past_deadline();
    // register (idempotent); a worker that cannot register retries
    let body = json!({"name": QUERY, "source_queue": queue, "config_hash": config_hash(),
                      "reset": false, "sink_queue": SINK});
    let query_id = loop {
        if stopped() {
            return log;
        }
        if let Ok(v) = post(&http, &urls, &mut rng, "/streams/v1/queries", &body).await {
            if let Some(id) = v["query_id"].as_str() {
                log.registrations += 1;
                break id.to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let g = group();
    while !stopped() {
        let broker = rng.index(urls.len());
        let url = format!(
            "{}/api/v1/pop/queue/{queue}?consumerGroup={g}&batch={BATCH}&partitions={MAX_PARTITIONS}&wait=true&timeout=1000",
            urls[broker]
        );
        let Ok(messages) = pop(&http, &url).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        log.pops += 1;
        if messages.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        log.delivered += messages.len() as u64;
        for mut batch in group_by_partition(messages) {
            if stopped() {
                break;
            }
            // the runner's order: createdAt (milliseconds), then message id
            batch.sort_by(|a, b| (&a.created_ms, &a.id).cmp(&(&b.created_ms, &b.id)));
            let drain = ctl.drain_mode.load(Ordering::Acquire);
            if !drain && rng.chance(DROP_CHANCE) {
                log.drops += 1;
                continue;
            }
            let first = &batch[0];
            let state_body =
                json!({"query_id": query_id, "partition_id": first.partition_id, "keys": []});
            let Ok(state) =
                post(&http, &urls, &mut rng, "/streams/v1/state/get", &state_body).await
            else {
                log.state_reads_failed += 1;
                continue;
            };
            if !drain && rng.chance(STALL_CHANCE) {
                log.stalls += 1;
                tokio::time::sleep(Duration::from_millis(lease_secs * 1000 + 700)).await;
            }
            let ev = cycle(idx, &query_id, &batch, &state, &http, &urls, &ctl, &mut rng).await;
            log.cycles.push(ev);
        }
    }
    log
}

/// The config hash the SDK would send: opaque to the broker, stable per run.
fn config_hash() -> String {
    format!(
        "{:016x}",
        stable_hash(&["chaos-count", "key_by", "gate", "to"])
    )
}

/// Counts the batch per key on top of the read state and commits the cycle.
#[expect(
    clippy::too_many_arguments,
    reason = "the worker's loop state, passed down once"
)]
async fn cycle(
    worker: usize,
    query_id: &str,
    batch: &[SourceMsg],
    state: &Value,
    http: &reqwest::Client,
    urls: &[String],
    ctl: &Control,
    rng: &mut Rng,
) -> CycleEvent {
    let mut counts: HashMap<String, i64> = HashMap::new();
    for row in state["rows"].as_array().into_iter().flatten() {
        if let (Some(k), Some(n)) = (row["key"].as_str(), row["value"]["count"].as_i64()) {
            counts.insert(k.to_owned(), n);
        }
    }
    let mut touched: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in batch {
        touched
            .entry(stream_key(&m.partition, &m.txid))
            .or_default()
            .push(m.txid.clone());
    }
    let cycle_id = uuid::Uuid::new_v4().to_string();
    let mut state_ops = Vec::new();
    let mut push_items = Vec::new();
    for (key, src) in &touched {
        let inc = src.len() as i64;
        let total = counts.get(key).copied().unwrap_or(0) + inc;
        state_ops.push(json!({"type": "upsert", "key": key, "value": {"count": total}}));
        push_items.push(json!({"queue": SINK, "partition": batch[0].partition,
            "payload": {"key": key, "inc": inc, "total": total, "src": src, "cycle": cycle_id}}));
    }
    let last = &batch[batch.len() - 1];
    let body = json!({
        "query_id": query_id,
        "partition_id": last.partition_id,
        "consumer_group": group(),
        "state_ops": state_ops,
        "push_items": push_items,
        "ack": {"transactionId": last.txid, "leaseId": last.lease_id,
                "status": "completed", "count": batch.len()},
        "release_lease": true,
    });
    let t_start = ctl.micros();
    let (outcome, brokers) = commit(http, urls, rng, &body).await;
    CycleEvent {
        worker,
        cycle: cycle_id,
        partition_id: last.partition_id.clone(),
        partition: last.partition.clone(),
        lease_id: last.lease_id.clone(),
        txids: batch.iter().map(|m| m.txid.clone()).collect(),
        brokers,
        t_start,
        t_end: ctl.micros(),
        outcome,
    }
}

/// One SDK call answer.
enum Answer {
    Ok(Value),
    /// A 4xx other than 408/429: not retried.
    Refused(u16, Value),
    /// 5xx, 408, 429 or a transport error: retried.
    Retry(String),
}

async fn send(http: &reqwest::Client, url: &str, body: &Value) -> Answer {
    let resp = match http.post(url).json(body).send().await {
        Ok(r) => r,
        Err(e) => return Answer::Retry(format!("request failed: {e}")),
    };
    let status = resp.status().as_u16();
    let text = match resp.text().await {
        Ok(t) => t,
        Err(e) => return Answer::Retry(format!("body unreadable: {e}")),
    };
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match status {
        200..=299 => Answer::Ok(v),
        408 | 429 | 500.. => Answer::Retry(format!("answered {status}: {text}")),
        _ => Answer::Refused(status, v),
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((100u64 << attempt.min(6)).min(5000))
}

/// A call the SDK's way; an error on a refusal or when retries run out.
async fn post(
    http: &reqwest::Client,
    urls: &[String],
    rng: &mut Rng,
    path: &str,
    body: &Value,
) -> Result<Value, String> {
    let mut last = String::new();
    for attempt in 0..ATTEMPTS {
        let url = format!("{}{path}", urls[rng.index(urls.len())]);
        match send(http, &url, body).await {
            Answer::Ok(v) if v["success"] != false => return Ok(v),
            Answer::Ok(v) => return Err(format!("success:false: {v}")),
            Answer::Refused(s, v) => return Err(format!("answered {s}: {v}")),
            Answer::Retry(e) => last = e,
        }
        if attempt + 1 < ATTEMPTS {
            tokio::time::sleep(backoff(attempt)).await;
        }
    }
    Err(last)
}

/// The cycle call, with what each attempt tells about whether it applied.
async fn commit(
    http: &reqwest::Client,
    urls: &[String],
    rng: &mut Rng,
    body: &Value,
) -> (CycleOutcome, Vec<usize>) {
    let mut brokers = Vec::new();
    let mut uncertain: Option<String> = None;
    for attempt in 0..ATTEMPTS {
        let b = rng.index(urls.len());
        brokers.push(b);
        let url = format!("{}/streams/v1/cycle", urls[b]);
        let outcome = match send(http, &url, body).await {
            Answer::Ok(v) if v["success"] == true => {
                let ids = v["push_results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| r["messageId"].as_str().unwrap_or_default().to_owned())
                    .collect();
                CycleOutcome::Committed { message_ids: ids }
            }
            Answer::Ok(v) => refusal(200, &v),
            Answer::Refused(s, v) => refusal(s, &v),
            Answer::Retry(e) => {
                uncertain = Some(e);
                if attempt + 1 < ATTEMPTS {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                continue;
            }
        };
        return match (outcome, &uncertain) {
            (CycleOutcome::Refused { status, code }, Some(e)) => (
                CycleOutcome::Unknown(format!("{e}; then {status} {code}")),
                brokers,
            ),
            (o, _) => (o, brokers),
        };
    }
    (
        CycleOutcome::Unknown(uncertain.unwrap_or_default()),
        brokers,
    )
}

fn refusal(status: u16, v: &Value) -> CycleOutcome {
    CycleOutcome::Refused {
        status,
        code: v["code"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .unwrap_or("?")
            .to_owned(),
    }
}

/// The runner's grouping: one group per partition, in first-seen order.
fn group_by_partition(messages: Vec<SourceMsg>) -> Vec<Vec<SourceMsg>> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Vec<SourceMsg>> = HashMap::new();
    for m in messages {
        if !groups.contains_key(&m.partition_id) {
            order.push(m.partition_id.clone());
        }
        groups.entry(m.partition_id.clone()).or_default().push(m);
    }
    order
        .into_iter()
        .filter_map(|p| groups.remove(&p))
        .collect()
}

/// `createdAt` cut to the millisecond, as the SDK's `_parse_iso_ms` reads
/// it; compares like the instant for the broker's fixed UTC format.
fn millis(created_at: &str) -> String {
    let (head, rest) = created_at.split_once('.').unwrap_or((created_at, ""));
    let frac: String = rest
        .chars()
        .take_while(char::is_ascii_digit)
        .chain(std::iter::repeat('0'))
        .take(3)
        .collect();
    format!("{head}.{frac}")
}

async fn pop(http: &reqwest::Client, url: &str) -> Result<Vec<SourceMsg>, String> {
    let resp = http.get(url).send().await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if status == 204 {
        return Ok(Vec::new());
    }
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if status != 200 || v["success"] != true {
        return Err(format!("pop answered {status}: {v}"));
    }
    let s = |m: &Value, k: &str| m[k].as_str().unwrap_or_default().to_owned();
    Ok(v["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| SourceMsg {
            partition_id: s(m, "partitionId"),
            partition: s(m, "partition"),
            txid: s(m, "transactionId"),
            id: s(m, "id"),
            lease_id: s(m, "leaseId"),
            created_ms: millis(m["createdAt"].as_str().unwrap_or_default()),
        })
        .collect())
}

/// One state row of the query, as stored.
#[derive(Debug, Clone)]
pub struct StateRow {
    pub partition: String,
    pub key: String,
    pub value: Value,
}

/// Reads the query's state rows straight from `queen_streams.state`.
pub async fn read_state(db: &tokio_postgres::Client) -> anyhow::Result<Vec<StateRow>> {
    let rows = db
        .query(
            "SELECT p.name, s.key, s.value::text
               FROM queen_streams.state s
               JOIN queen_streams.queries q ON q.id = s.query_id
               JOIN queen.partitions p ON p.id = s.partition_id
              WHERE q.name = $1",
            &[&QUERY],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StateRow {
            partition: r.get(0),
            key: r.get(1),
            value: serde_json::from_str(r.get::<_, &str>(2)).unwrap_or(Value::Null),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_at_is_cut_to_the_millisecond() {
        assert_eq!(
            millis("2026-12-01T16:00:00.123456Z"),
            "2026-12-01T16:00:00.123"
        );
        assert_eq!(millis("2026-12-01T16:00:00.1Z"), "2026-12-01T16:00:00.100");
        assert!(millis("2026-12-01T16:00:00.999999Z") < millis("2026-12-01T16:00:01.000Z"));
    }

    #[test]
    fn groups_keep_first_seen_partition_order() {
        let m = |p: &str, t: &str| SourceMsg {
            partition_id: p.into(),
            partition: p.into(),
            txid: t.into(),
            id: t.into(),
            lease_id: String::new(),
            created_ms: String::new(),
        };
        let g = group_by_partition(vec![m("b", "1"), m("a", "2"), m("b", "3")]);
        assert_eq!(g.len(), 2);
        assert_eq!(
            g[0].iter().map(|x| x.txid.as_str()).collect::<Vec<_>>(),
            ["1", "3"]
        );
        assert_eq!(g[1][0].txid, "2");
    }
}
