//! Producers: pushes with retries, every answer journaled.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::{
    http_client, partition_name, Control, WorkloadConfig, IN_REQUEST_REPEAT_CHANCE, PUSH_ATTEMPTS,
    REPEAT_CHANCE,
};
use crate::journal::{ItemKind, PushEvent, Told};
use crate::rng::Rng;

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
