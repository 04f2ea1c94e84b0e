//! The recurring-timer workload: a few timers with an interval or a cron
//! schedule are put on random brokers when the traffic starts, fire through
//! every fault of the schedule, and are cancelled after it (every fault
//! healed). Nobody consumes their queue: the checker reads every fire from
//! the segments (`check::recurring`). It adds no time to the run: the
//! schedules take a request each, the cancels another.

use std::time::Duration;

use anyhow::{Context as _, Result};
use base64::Engine as _;
use serde_json::{json, Value};

use crate::rng::Rng;

/// The destination queue of the recurring timers.
pub const RECURRING_QUEUE: &str = "chaos-recurring";
/// Attempts of a schedule or cancel that got no answer (each on another broker).
const ATTEMPTS: usize = 8;

/// One recurring timer of the run: its key (also its partition), its txn
/// (each fire's transactionId is `txn@<tick>`), and its schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecurringSpec {
    pub key: &'static str,
    pub txn: &'static str,
    /// The tick spacing in ms (a cron schedule: its shortest, one minute).
    pub period_ms: i64,
    /// The `intervalMs`, or `None` for the cron schedule.
    pub interval_ms: Option<i64>,
    pub catch_up: &'static str,
}

/// The timers: two intervals (one with each catch-up rule) and a cron
/// schedule in a zone with DST, every minute.
pub const SPECS: [RecurringSpec; 3] = [
    RecurringSpec {
        key: "r-700",
        txn: "rc-700",
        period_ms: 700,
        interval_ms: Some(700),
        catch_up: "one",
    },
    RecurringSpec {
        key: "r-1300",
        txn: "rc-1300",
        period_ms: 1300,
        interval_ms: Some(1300),
        catch_up: "none",
    },
    RecurringSpec {
        key: "r-cron",
        txn: "rc-cron",
        period_ms: 60_000,
        interval_ms: None,
        catch_up: "one",
    },
];

/// What the run did to one recurring timer.
#[derive(Debug, Clone)]
pub struct RecurringTimer {
    pub spec: RecurringSpec,
    /// The answered first tick (µs since the Unix epoch, database clock) of
    /// the schedule that stood; `None` when no attempt was answered.
    pub first_us: Option<i64>,
    /// The answered cancel: `Some(true)` cancelled, `Some(false)` absent.
    pub cancelled: Option<bool>,
    /// Harness micros when the schedule was answered and when the cancel was sent.
    pub t_scheduled: u64,
    pub t_cancel: u64,
}

/// A fire as the segments hold it.
#[derive(Debug, Clone)]
pub struct RecurringFire {
    pub partition: String,
    pub txn: String,
    /// `created_at` of its segment, µs (database clock).
    pub created_us: i64,
}

/// What the checker reads.
#[derive(Debug, Default)]
pub struct RecurringJournal {
    pub timers: Vec<RecurringTimer>,
    pub fires: Vec<RecurringFire>,
    /// Timer rows of the queue left after the cancels.
    pub pending: Vec<String>,
}

fn op(spec: &RecurringSpec) -> Value {
    let payload =
        base64::engine::general_purpose::STANDARD.encode(json!({"timer": spec.key}).to_string());
    let mut o = json!({"op": "schedule", "queue": RECURRING_QUEUE, "timerKey": spec.key,
        "partition": spec.key, "payload": payload, "txn": spec.txn, "catchUp": spec.catch_up});
    match spec.interval_ms {
        Some(ms) => o["intervalMs"] = json!(ms),
        None => {
            o["cron"] = json!("* * * * *");
            o["timezone"] = json!("Europe/Berlin");
        }
    }
    o
}

/// Sends `req` to broker `first`, then to the next ones while unanswered;
/// the JSON of the first 200.
async fn send(
    urls: &[String],
    first: usize,
    req: impl Fn(&str) -> reqwest::RequestBuilder,
) -> Option<Value> {
    for i in 0..ATTEMPTS {
        let url = &urls[(first + i) % urls.len()];
        if let Ok(resp) = req(url).send().await {
            if resp.status().is_success() {
                if let Ok(v) = resp.json::<Value>().await {
                    return Some(v);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    None
}

/// Schedules every timer of [`SPECS`], each on a random broker first.
pub async fn start(
    http: &reqwest::Client,
    urls: &[String],
    rng: &mut Rng,
    now_us: impl Fn() -> u64,
) -> Vec<RecurringTimer> {
    let mut out = Vec::new();
    for spec in SPECS {
        let body = json!({"operations": [op(&spec)]});
        let answer = send(urls, rng.index(urls.len()), |u| {
            http.post(format!("{u}/api/v1/timers")).json(&body)
        })
        .await;
        let first_us = answer.and_then(|v| {
            v["results"][0]["deliverAt"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_micros())
        });
        out.push(RecurringTimer {
            spec,
            first_us,
            cancelled: None,
            t_scheduled: now_us(),
            t_cancel: 0,
        });
    }
    out
}

/// Cancels every timer (all faults healed by now), then reads what fired.
pub async fn finish(
    http: &reqwest::Client,
    urls: &[String],
    db: &tokio_postgres::Client,
    mut timers: Vec<RecurringTimer>,
    now_us: impl Fn() -> u64,
) -> Result<RecurringJournal> {
    for (i, t) in timers.iter_mut().enumerate() {
        t.t_cancel = now_us();
        let key = t.spec.key;
        let answer = send(urls, i, |u| {
            http.delete(format!("{u}/api/v1/timers/{RECURRING_QUEUE}/{key}"))
        })
        .await;
        t.cancelled = answer.map(|v| v["status"] == "cancelled");
    }
    let fires = crate::dbstate::queue_messages(db, RECURRING_QUEUE)
        .await?
        .into_iter()
        .map(|m| RecurringFire {
            partition: m.partition,
            txn: m.txid,
            created_us: m.created_us,
        })
        .collect();
    let pending = db
        .query(
            "SELECT timer_key FROM queen.timers WHERE queue = $1",
            &[&RECURRING_QUEUE],
        )
        .await
        .context("read pending recurring timers")?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(RecurringJournal {
        timers,
        fires,
        pending,
    })
}
