//! Scratch queues: named, warmed with partitions, drained.

use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::time::Instant;

use crate::api::{AckItem, Api, PopParams};
use crate::load::{self, RunState};

pub fn queue_name(prefix: &str) -> String {
    format!(
        "bench-{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// Creates the queue and all its partitions (one message each, unmeasured),
/// so a measured run sees steady state rather than partition creation.
pub async fn warm_partitions(
    api: &Api,
    queue: &str,
    partitions: u32,
    payload_bytes: usize,
) -> Result<u64> {
    let run = RunState::new(queue.to_owned(), u64::from(partitions));
    let salt = load::salt(&run.prefix);
    let chunk = 200u64;
    let mut first = 0u64;
    let total = u64::from(partitions);
    while first < total {
        let last = (first + chunk).min(total);
        let mut body = String::from("{\"items\":[");
        for i in first..last {
            if i > first {
                body.push(',');
            }
            body.push_str(&format!(
                "{{\"queue\":\"{queue}\",\"partition\":\"{}\",\"transactionId\":\"{}\",\"payload\":{}}}",
                load::partition_name(i),
                load::txid(&run.prefix, i),
                load::payload_for(payload_bytes, i, salt)
            ));
        }
        body.push_str("]}");
        api.push_raw(body, (last - first) as usize)
            .await
            .context("warming up partitions")?;
        first = last;
    }
    Ok(total)
}

/// Pops and acks everything in the queue (unmeasured), wide pops.
pub async fn drain_all(api: &Api, queue: &str, expected: u64, within: Duration) -> Result<u64> {
    let params = PopParams {
        batch: 1000,
        partitions: 200,
        wait_ms: None,
        consumer_group: None,
    };
    let deadline = Instant::now() + within;
    let mut got = 0;
    let mut empty = 0;
    while got < expected && Instant::now() < deadline {
        let msgs = api.pop(queue, &params).await?;
        if msgs.is_empty() {
            empty += 1;
            if empty > 50 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        got += msgs.len() as u64;
        let acks: Vec<AckItem<'_>> = msgs
            .iter()
            .filter_map(|m| {
                Some(AckItem {
                    transaction_id: &m.transaction_id,
                    partition_id: &m.partition_id,
                    lease_id: m.lease_id.as_deref().filter(|l| !l.is_empty())?,
                    status: "completed",
                })
            })
            .collect();
        if !acks.is_empty() {
            api.ack_batch(&acks).await?;
        }
    }
    Ok(got)
}
