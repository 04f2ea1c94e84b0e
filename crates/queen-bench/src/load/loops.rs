//! The tasks of a load run: a producer loop, a consumer loop, the progress line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use anyhow::Result;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::{
    add, get, AbortOnDrop, ConsumeSpec, Consumer, Group, Live, ProduceSpec, Producer, RunState,
};
use crate::stats::Latencies;

pub(super) async fn produce_loop<P: Producer>(
    mut producer: P,
    run: Arc<RunState>,
    spec: ProduceSpec,
    live: Arc<Live>,
    next_batch: Arc<AtomicU64>,
    start: Instant,
) -> Result<(Latencies, Instant)> {
    let messages = spec.messages.min(run.capacity());
    let batch = u64::from(spec.batch.max(1));
    let total_batches = messages.div_ceil(batch);
    let deadline = start + Duration::from_secs_f64(spec.seconds);
    let mut lat = Latencies::default();
    let mut last = start;
    loop {
        if Instant::now() >= deadline {
            break;
        }
        let index = next_batch.fetch_add(1, Ordering::Relaxed);
        if index >= total_batches {
            break;
        }
        if let Some(rate) = spec.rate {
            let at = start + Duration::from_secs_f64((index * batch) as f64 / rate);
            if at >= deadline {
                break;
            }
            tokio::time::sleep_until(at).await;
        }
        let first = index * batch;
        let last_seq = (first + batch).min(messages);
        let partition = if spec.fresh {
            index
        } else {
            index % u64::from(spec.partitions.max(1))
        };
        let sent = Instant::now();
        let queued = producer
            .push(partition, first, last_seq)
            .await
            .map_err(|e| e.context(format!("push of batch {index} to partition {partition}")))?;
        let answered = Instant::now();
        lat.record(answered.duration_since(sent));
        let ns = run.ns_since_t0(answered);
        for seq in first..last_seq {
            run.answered[seq as usize].store(ns, Ordering::Relaxed);
        }
        add(&live.push_requests, 1);
        add(&live.pushed, queued);
        last = answered;
    }
    Ok((lat, last))
}

pub(super) struct ConsumerDone {
    pub(super) pop_latencies: Latencies,
    pub(super) ack_latencies: Latencies,
    /// (received, ms since t0; end-to-end latency in µs)
    pub(super) samples: Vec<(u32, u32)>,
    pub(super) early: u64,
    pub(super) last_new: Option<Instant>,
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn consume_loop<C: Consumer>(
    mut consumer: C,
    run: Arc<RunState>,
    groups: Arc<Vec<Group>>,
    gi: usize,
    spec: ConsumeSpec,
    live: Arc<Live>,
    mut done: watch::Receiver<bool>,
    start: Instant,
) -> Result<ConsumerDone> {
    let group = &groups[gi];
    let deadline = start + Duration::from_secs_f64(spec.seconds);
    let mut out = ConsumerDone {
        pop_latencies: Latencies::default(),
        ack_latencies: Latencies::default(),
        samples: Vec::new(),
        early: 0,
        last_new: None,
    };
    let capacity = run.capacity();
    loop {
        if *done.borrow() || Instant::now() >= deadline {
            break;
        }
        if live.producers_done.load(Ordering::Acquire) && get(&group.received) >= get(&live.pushed)
        {
            break;
        }
        let sent = Instant::now();
        let messages = tokio::select! {
            r = consumer.pop() => r?,
            _ = done.changed() => break,
        };
        let received_at = Instant::now();
        out.pop_latencies.record(received_at.duration_since(sent));
        add(&live.pop_requests, 1);
        if messages.is_empty() {
            add(&live.empty_pops, 1);
            if received_at.duration_since(sent) < Duration::from_millis(1) {
                // The broker did not hold the poll; do not spin.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            continue;
        }
        let recv_ns = run.ns_since_t0(received_at);
        let recv_ms = u32::try_from(recv_ns / 1_000_000).unwrap_or(u32::MAX);
        let (mut new, mut again, mut foreign) = (0, 0, 0);
        for seq in &messages {
            match seq.filter(|&s| s < capacity) {
                Some(seq) => {
                    if group.mark(seq) {
                        new += 1;
                        let answered = run.answered[seq as usize].load(Ordering::Relaxed);
                        let lat_us = if answered == 0 || answered > recv_ns {
                            out.early += 1;
                            0
                        } else {
                            u32::try_from((recv_ns - answered) / 1000).unwrap_or(u32::MAX)
                        };
                        out.samples.push((recv_ms, lat_us));
                    } else {
                        again += 1;
                    }
                }
                None => foreign += 1,
            }
        }
        add(&group.received, new);
        add(&live.received, new);
        add(&live.redelivered, again);
        add(&live.foreign, foreign);
        if new > 0 {
            out.last_new = Some(received_at);
        }
        let sent = Instant::now();
        let Some(outcome) = consumer
            .ack()
            .await
            .map_err(|e| e.context(format!("acking {} messages", messages.len())))?
        else {
            continue;
        };
        out.ack_latencies.record(sent.elapsed());
        add(&live.acked, outcome.succeeded);
        add(&live.ack_failures, outcome.failed);
        if let Some(e) = outcome.first_error {
            live.first_ack_error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(e);
        }
    }
    Ok(out)
}

pub(super) fn spawn_progress(
    label: String,
    live: Arc<Live>,
    start: Instant,
    pid: Option<u32>,
) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(async move {
        let mut tick =
            tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
        tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
        let mut last = (
            start,
            0u64,
            0u64,
            pid.and_then(crate::procstat::cpu_seconds),
        );
        loop {
            let now = tick.tick().await;
            let (pushed, received) = (get(&live.pushed), get(&live.received));
            let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
            let cpu = pid.and_then(crate::procstat::cpu_seconds);
            let mut line = format!(
                "[{label}] {:>5.1}s pushed {pushed} ({:.0}/s) received {received} ({:.0}/s) pops {} empty {}",
                now.duration_since(start).as_secs_f64(),
                pushed.saturating_sub(last.1) as f64 / dt,
                received.saturating_sub(last.2) as f64 / dt,
                get(&live.pop_requests),
                get(&live.empty_pops),
            );
            if let (Some(c1), Some(c0)) = (cpu, last.3) {
                let rss = pid
                    .and_then(crate::procstat::memory)
                    .map_or(0.0, |m| m.rss as f64 / 1048576.0);
                line.push_str(&format!(
                    " | broker cpu {:.0}% rss {rss:.1} MB",
                    100.0 * (c1 - c0) / dt
                ));
            }
            eprintln!("{line}");
            last = (now, pushed, received, cpu);
        }
    }))
}
