//! Consumers: pops, processing (poison, flaky, slow, abandoned), lease extension and acks, every answer journaled.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::{
    http_client, is_flaky, is_poison, partition_name, Control, WorkloadConfig, ABANDON_CHANCE,
    EXTEND_CHANCE, NAMED_PARTITION_CHANCE, PAUSE_CHANCE, SLOW_CHANCE,
};
use crate::journal::{AckEvent, AckItem, AckOutcome, Delivery, Handling, PopEvent};
use crate::rng::Rng;

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
