//! Final results: a table on stdout and the same numbers as JSON.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde::Serialize;

use crate::scenario::{DrainResult, PushPopConfig, PushResult};
use crate::stats::Latencies;

/// One row of the table: throughput and request latency of one kind of request.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseReport {
    pub phase: &'static str,
    pub messages: u64,
    pub requests: u64,
    pub seconds: f64,
    pub msg_per_sec: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl PhaseReport {
    pub fn new(
        phase: &'static str,
        messages: u64,
        requests: u64,
        elapsed: Duration,
        latencies: Latencies,
    ) -> Self {
        let seconds = elapsed.as_secs_f64();
        let summary = latencies.summary();
        Self {
            phase,
            messages,
            requests,
            seconds,
            msg_per_sec: if seconds > 0.0 {
                messages as f64 / seconds
            } else {
                0.0
            },
            p50_ms: summary.p50_ms,
            p99_ms: summary.p99_ms,
            max_ms: summary.max_ms,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: &'static str,
    pub queue: String,
    pub config: PushPopConfig,
    pub phases: Vec<PhaseReport>,
    pub push: PushDetails,
    pub drain: DrainDetails,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushDetails {
    pub requested: u64,
    pub queued: u64,
    pub duplicates: u64,
    pub seconds: f64,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainDetails {
    pub target: u64,
    pub received_unique: u64,
    pub redelivered: u64,
    /// Messages popped that this run did not push (a reused queue).
    pub foreign: u64,
    pub empty_pops: u64,
    pub acked: u64,
    pub ack_failures: u64,
    pub first_ack_error: Option<String>,
    pub complete: bool,
    pub seconds: f64,
}

impl Report {
    pub fn new(cfg: &PushPopConfig, queue: &str, push: &PushResult, drain: &DrainResult) -> Self {
        Self {
            scenario: "push-pop",
            queue: queue.to_owned(),
            config: cfg.clone(),
            phases: vec![
                push.report.clone(),
                drain.pop_report.clone(),
                drain.ack_report.clone(),
            ],
            push: PushDetails {
                requested: cfg.messages,
                queued: push.queued,
                duplicates: push.duplicates,
                seconds: push.elapsed.as_secs_f64(),
            },
            drain: DrainDetails {
                target: drain.target,
                received_unique: drain.received,
                redelivered: drain.redelivered,
                foreign: drain.foreign,
                empty_pops: drain.empty_pops,
                acked: drain.acked,
                ack_failures: drain.ack_failures,
                first_ack_error: drain.first_ack_error.clone(),
                complete: drain.received >= drain.target,
                seconds: drain.elapsed.as_secs_f64(),
            },
        }
    }

    pub fn print_table(&self) {
        println!("{}", self.table());
    }

    fn table(&self) -> String {
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        let mut out = format!(
            "{:<6} {:>9} {:>9} {:>8} {:>10} {:>8} {:>8}\n",
            "phase", "messages", "requests", "seconds", "msg/s", "p50 ms", "p99 ms"
        );
        for p in &self.phases {
            out.push_str(&format!(
                "{:<6} {:>9} {:>9} {:>8.2} {:>10.1} {:>8} {:>8}\n",
                p.phase,
                p.messages,
                p.requests,
                p.seconds,
                p.msg_per_sec,
                ms(p.p50_ms),
                ms(p.p99_ms)
            ));
        }
        let d = &self.drain;
        out.push_str(&format!(
            "drain: {}/{} unique received ({}), {} redelivered, {} foreign, {} empty pops, {} ack failures",
            d.received_unique,
            d.target,
            if d.complete { "complete" } else { "INCOMPLETE" },
            d.redelivered,
            d.foreign,
            d.empty_pops,
            d.ack_failures,
        ));
        if let Some(e) = &d.first_ack_error {
            out.push_str(&format!(" (first: {e})"));
        }
        out
    }

    pub fn write_json(&self, path: &Path) -> Result<()> {
        let mut json = serde_json::to_string_pretty(self).context("serializing report")?;
        json.push('\n');
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
    }
}
